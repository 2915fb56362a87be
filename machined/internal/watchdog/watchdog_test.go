package watchdog

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type fakeDevice struct {
	pets   atomic.Int32
	closed atomic.Bool
}

func (d *fakeDevice) Keepalive() error { d.pets.Add(1); return nil }
func (d *fakeDevice) Close() error     { d.closed.Store(true); return nil }

func waitPets(t *testing.T, d *fakeDevice, n int32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for d.pets.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d pets after 5 s, want %d", d.pets.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func run(h *Machine, answers func()) (cancel func()) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx, answers) }()
	return func() { stop(); <-done }
}

// A node that answers is petted; the end of machined (a clean shutdown) disarms the device.
func TestMachinePetsAndDisarms(t *testing.T) {
	d := &fakeDevice{}
	h := &Machine{Dev: d, Timeout: 90 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cancel := run(h, func() {})
	waitPets(t, d, 3)
	cancel()
	if !d.closed.Load() {
		t.Error("the watchdog was not disarmed when machined stopped cleanly")
	}
}

// Stop (the debug RPC) and a node that stops answering both end the petting, and the device stays
// armed: the machine resets.
func TestMachineStopsPetting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stuck bool // the node stops answering; else Stop is called
	}{
		{"stopped on request", false},
		{"the node no longer answers", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDevice{}
			h := &Machine{Dev: d, Timeout: 90 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			block := make(chan struct{})
			var stuck atomic.Bool
			cancel := run(h, func() {
				if stuck.Load() {
					<-block
				}
			})
			waitPets(t, d, 2)
			if tc.stuck {
				stuck.Store(true)
				time.Sleep(60 * time.Millisecond) // the question in flight, if any, is answered
			} else {
				h.Stop()
			}
			time.Sleep(40 * time.Millisecond)
			before := d.pets.Load()
			time.Sleep(300 * time.Millisecond) // ten periods
			if after := d.pets.Load(); after != before {
				t.Errorf("%d pets after the petting should have stopped", after-before)
			}
			if tc.stuck {
				close(block)
			}
			cancel()
			if !tc.stuck && d.closed.Load() {
				t.Error("a watchdog stopped on request was disarmed: the machine would never reset")
			}
		})
	}
}

// The console says which watchdog is armed: e2e tests and users look for the line.
func TestArmedSaysWhichWatchdog(t *testing.T) {
	for _, tt := range []struct {
		software bool
		want     string
	}{
		{false, `msg="watchdog: hardware watchdog armed"`},
		{true, `msg="watchdog: software watchdog armed (the kernel's softdog: no hardware watchdog)"`},
	} {
		var out strings.Builder
		d := &fakeDevice{}
		h := &Machine{Dev: d, Timeout: 90 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&out, nil)), Software: tt.software}
		cancel := run(h, func() {})
		waitPets(t, d, 1)
		cancel()
		if got := out.String(); !strings.Contains(got, tt.want) {
			t.Errorf("Software=%v: log %q, want %s", tt.software, got, tt.want)
		}
	}
}
