package supervisor

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/logring"
)

// crasher exits at once the first n times, then runs until stopped.
type crasher struct {
	n    int32
	runs atomic.Int32
}

func (c *crasher) Run(ctx context.Context, log *logring.Ring, started func(int)) error {
	run := c.runs.Add(1)
	started(int(run))
	log.Add("run " + string(rune('0'+run)))
	if run <= c.n {
		return errors.New("boom")
	}
	<-ctx.Done()
	return ctx.Err()
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCrashedServiceIsRestartedWithBackoff(t *testing.T) {
	bus := events.NewBus(nil, nil)
	s := New(bus, nil)
	c := &crasher{n: 2}
	start := time.Now()
	s.Start(Service{Name: "kubelet", Runner: c})
	waitFor(t, "the third run", func() bool { i, _ := s.Info("kubelet"); return i.State == StateRunning && c.runs.Load() == 3 })
	// Two crashes: backoff of 1s, then 2s, give or take.
	if took := time.Since(start); took < 2500*time.Millisecond {
		t.Errorf("three runs took %s; the backoff (1s, 2s) was not applied", took)
	}
	i, _ := s.Info("kubelet")
	if i.Restarts != 2 || i.LastError != "boom" {
		t.Errorf("Info = %+v, want 2 restarts and the last error", i)
	}
	var crashes int
	for _, e := range bus.History(0) {
		if e.Kind == events.KindService && e.Outcome == "crashed" {
			crashes++
		}
	}
	if crashes != 2 {
		t.Errorf("%d crash events, want 2", crashes)
	}
	if err := s.Stop(context.Background(), "kubelet"); err != nil {
		t.Fatal(err)
	}
	if i, _ := s.Info("kubelet"); i.State != StateStopped {
		t.Errorf("after Stop: state %s", i.State)
	}
	if got := s.Logs("kubelet").Tail(0); len(got) != 3 || !strings.HasPrefix(got[2].Text, "run") {
		t.Errorf("logs = %+v", got)
	}
}

func TestStopDuringBackoffAndUnknown(t *testing.T) {
	s := New(nil, nil)
	s.Start(Service{Name: "x", Runner: &crasher{n: 100}})
	waitFor(t, "backoff", func() bool { i, _ := s.Info("x"); return i.State == StateBackoff })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Stop(ctx, "x"); err != nil {
		t.Fatalf("Stop during backoff = %v", err)
	}
	if err := s.Stop(ctx, "nope"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Stop(unknown) = %v", err)
	}
}
