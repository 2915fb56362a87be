package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/events"
)

// WatchdogStop stops the petting of the watchdog (the hardware's, or the kernel's software one); the
// machine resets within the answer's time.
func (s *Server) WatchdogStop(context.Context, *machine.WatchdogStopRequest) (*machine.WatchdogStopResponse, error) {
	var left time.Duration
	armed := false
	if s.Watchdog != nil {
		left, armed = s.Watchdog()
	}
	if !armed {
		return nil, status.Error(codes.FailedPrecondition, "this node has no watchdog armed (neither a hardware one nor the kernel's softdog)")
	}
	if s.Bus != nil {
		s.Bus.Publish(events.Event{Kind: events.KindWatchdog, Outcome: "stopped",
			Message: "petting of the watchdog stopped on request: the machine resets within " + left.String()})
	}
	return &machine.WatchdogStopResponse{ResetWithinSeconds: uint32(left / time.Second)}, nil
}
