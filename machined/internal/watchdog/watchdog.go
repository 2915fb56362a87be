// Package watchdog pets a watchdog while the node answers: systemd's (sd_notify WATCHDOG=1, sandbox mode)
// or the machine's (/dev/watchdog on a node: the hardware's, or the kernel's softdog). A node whose state
// machine is stuck no longer answers, the petting stops, and the watchdog restarts machined (systemd) or
// resets the machine, which then boots back to where its lock says.
package watchdog

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Pet calls pet every period while answers returns within the period. answers should take the node's
// lock, as Status does. It returns when ctx ends.
func Pet(ctx context.Context, log *slog.Logger, period time.Duration, answers func(), pet func() error) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	var pending chan struct{} // closed when the node answers the question in flight
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if ctx.Err() != nil { // both were ready: the end wins
			return
		}
		// One question to the node at a time: one that has not answered yet is waited on again rather
		// than asked twice, so a stuck node holds one goroutine here, not one per period.
		if pending == nil {
			done := make(chan struct{})
			go func() { answers(); close(done) }()
			pending = done
		}
		select {
		case <-pending:
			pending = nil
			if err := pet(); err != nil {
				log.Warn("watchdog: could not pet", "err", err)
			}
		case <-time.After(period):
			// The node did not answer: no pet. The watchdog acts once its timeout runs out.
			log.Error("watchdog: the node did not answer within its period; not petting", "period", period)
		case <-ctx.Done():
			return
		}
	}
}

// Device is the machine's watchdog device (sys.Watchdog): armed once opened, reset by Keepalive, disarmed by
// Close.
type Device interface {
	Keepalive() error
	Close() error
}

// Machine pets the machine's watchdog while the node answers, until Stop.
type Machine struct {
	Dev     Device
	Timeout time.Duration // what the device was set to; it is petted every third of it
	Log     *slog.Logger
	// Software says that Dev is the kernel's software watchdog (softdog), not the hardware's.
	Software bool
	stopped  atomic.Bool
}

// Armed is what the console and the event say when the device is armed: which watchdog it is.
func (h *Machine) Armed() string {
	if h.Software {
		return "software watchdog armed (the kernel's softdog: no hardware watchdog)"
	}
	return "hardware watchdog armed"
}

// Run pets the device every third of its timeout while the node answers, until ctx ends (the device is
// then disarmed) or Stop.
func (h *Machine) Run(ctx context.Context, answers func()) {
	h.Log.Info("watchdog: "+h.Armed(), "timeout", h.Timeout, "petted every", h.Timeout/3)
	Pet(ctx, h.Log, h.Timeout/3, answers, func() error {
		if h.stopped.Load() {
			return nil
		}
		return h.Dev.Keepalive()
	})
	if !h.stopped.Load() {
		if err := h.Dev.Close(); err != nil {
			h.Log.Warn("watchdog: disarm", "err", err)
		}
	}
}

// Stop stops the petting for good without disarming: the machine resets once the timeout passes. It is
// the test of the watchdog itself (the debug RPC); it returns the time left before the reset.
func (h *Machine) Stop() time.Duration {
	h.stopped.Store(true)
	h.Log.Warn("watchdog: petting stopped on request; the machine resets when the watchdog runs out", "within", h.Timeout)
	return h.Timeout
}
