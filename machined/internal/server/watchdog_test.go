package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
)

func TestWatchdogStop(t *testing.T) {
	mc := maintenanceClient(t, serveWith(t, func(*Server) {}))
	if _, err := mc.WatchdogStop(context.Background(), &machine.WatchdogStopRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("WatchdogStop() without a watchdog = %v, want FailedPrecondition", err)
	}

	stopped := false
	s := serveWith(t, func(s *Server) {
		s.Watchdog = func() (time.Duration, bool) { stopped = true; return 60 * time.Second, true }
	})
	r, err := maintenanceClient(t, s).WatchdogStop(context.Background(), &machine.WatchdogStopRequest{})
	if err != nil || r.ResetWithinSeconds != 60 || !stopped {
		t.Fatalf("WatchdogStop() = %v, %v (stopped %v), want 60 s and the petting stopped", r, err, stopped)
	}
	found := false
	for _, e := range s.bus.History(0) {
		found = found || e.Kind == "watchdog" && e.Outcome == "stopped"
	}
	if !found {
		t.Error("no watchdog event after WatchdogStop")
	}
}
