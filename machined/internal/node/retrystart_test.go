package node

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/sequence"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

// A start that fails on something passing (an API server that answered too slowly) runs again by itself
// and the node reaches Running, instead of staying in Boot until someone reboots it.
func TestFailedStartRunsAgain(t *testing.T) {
	c := testcluster.New(t)
	var starts atomic.Int32
	h := start(t, t.TempDir(), func(o *Options) {
		o.StartRetry = 10 * time.Millisecond
		o.Hooks.Workload = func(_ *config.MachineConfig, seq fsm.Sequence) []sequence.Task {
			if seq != fsm.SeqStart {
				return nil
			}
			return []sequence.Task{{Name: "bootstrap-objects", Run: func(context.Context) error {
				if starts.Add(1) <= 2 {
					return errors.New("net/http: timeout awaiting response headers")
				}
				return nil
			}}}
		}
	})
	initThenReboot(t, h, c.ControlPlaneYAML)
	if got := starts.Load(); got != 3 {
		t.Errorf("the start's task ran %d times, want 3 (two failures, then Running)", got)
	}
	failed := 0
	for _, e := range h.bus.History(0) {
		if e.Kind == events.KindSequence && e.Sequence == string(fsm.SeqStart) && e.Outcome == events.Failed {
			failed++
			if !strings.Contains(e.Error, "timeout awaiting response headers") {
				t.Errorf("failed start event = %q, want its cause", e.Error)
			}
		}
	}
	if failed != 2 {
		t.Errorf("%d failed start events, want 2", failed)
	}
	if st := h.Status(); st.LastError != "" {
		t.Errorf("status after the start succeeded: last error %q, want none", st.LastError)
	}
}
