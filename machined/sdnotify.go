package main

import (
	"context"
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/cairn-os/cairn/machined/internal/watchdog"
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
	go watchdog.Pet(ctx, log, interval/2, answers, func() error {
		_, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog)
		return err
	})
}
