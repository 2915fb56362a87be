package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notifySystemd speaks systemd's notify protocol when machined runs as a systemd service (sandbox mode in
// a unit with Type=notify, and WatchdogSec= if the unit wants a watchdog): READY=1 once the machine API
// serves and the boot sequence has run, then WATCHDOG=1 every half watchdog interval for as long as the
// node answers within that half interval. A machined whose node no longer answers (its state machine
// stuck) stops petting, and systemd restarts it. On a node, machined is PID 1, NOTIFY_SOCKET is unset and
// this does nothing.
//
// answers returns once the node has answered (it should take the node's lock, as Status does); the
// petting stops when ctx ends.
func notifySystemd(ctx context.Context, log *slog.Logger, answers func()) {
	sent, err := daemon.SdNotify(false, daemon.SdNotifyReady)
	if err != nil {
		log.Warn("systemd: could not report readiness", "err", err)
		return
	}
	if !sent {
		return // not a systemd service
	}
	log.Info("systemd: reported ready")
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("systemd: watchdog settings unreadable", "err", err)
		return
	}
	if interval <= 0 {
		return
	}
	log.Info("systemd: petting the watchdog", "every", interval/2)
	go petWatchdog(ctx, log, interval/2, answers)
}

// petWatchdog sends WATCHDOG=1 every period while answers returns within the period.
func petWatchdog(ctx context.Context, log *slog.Logger, period time.Duration, answers func()) {
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
			if _, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog); err != nil {
				log.Warn("systemd: could not pet the watchdog", "err", err)
			}
		case <-time.After(period):
			// The node did not answer: no pet. systemd restarts machined once the watchdog runs out.
			log.Error("systemd watchdog: the node did not answer within its period; not petting", "period", period)
		case <-ctx.Done():
			return
		}
	}
}
