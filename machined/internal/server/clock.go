package server

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/timesync"
)

// clockStatus maps the SNTP client's state to the API's.
func clockStatus(st timesync.State) *machine.ClockStatus {
	c := &machine.ClockStatus{Servers: st.Servers, Synced: st.Synced, Server: st.Server, OffsetNs: st.Offset.Nanoseconds(),
		Steps: int32(st.Steps), LastError: st.LastErr}
	if !st.LastSync.IsZero() {
		c.LastSync = timestamppb.New(st.LastSync)
	}
	return c
}
