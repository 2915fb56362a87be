package main

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/sys"
	"github.com/cairn-os/cairn/machined/internal/watchdog"
)

// watchdogTimeout is what the hardware watchdog is set to: a node whose state machine does not answer
// for this long is reset. Generous, because under emulation a busy node can stall for seconds.
const watchdogTimeout = 60 * time.Second

// hardwareWatchdog arms the machine's watchdog, when it has one, once the kernel modules are loaded
// (its driver is one), and pets it while the node answers.
type hardwareWatchdog struct {
	hw atomic.Pointer[watchdog.Hardware]
}

// run arms and pets the watchdog; it returns at once on a machine without one.
func (w *hardwareWatchdog) run(modules <-chan struct{}, n *node.Node, log *slog.Logger, bus *events.Bus) {
	<-modules
	dev, timeout, err := sys.OpenWatchdog(sys.WatchdogDevice, watchdogTimeout)
	if errors.Is(err, fs.ErrNotExist) {
		log.Info("watchdog: this machine has no hardware watchdog")
		return
	}
	if dev == nil {
		log.Error("watchdog: open "+sys.WatchdogDevice, "error", err)
		return
	}
	if err != nil {
		log.Warn("watchdog", "error", err)
	}
	hw := &watchdog.Hardware{Dev: dev, Timeout: timeout, Log: log}
	w.hw.Store(hw)
	bus.Publish(events.Event{Kind: events.KindWatchdog, Outcome: "armed",
		Message: "hardware watchdog armed: the machine resets when the node does not answer for " + timeout.String()})
	hw.Run(context.Background(), func() { n.Status() })
}

// stop is the WatchdogStop RPC's: false when no watchdog is armed.
func (w *hardwareWatchdog) stop() (time.Duration, bool) {
	hw := w.hw.Load()
	if hw == nil {
		return 0, false
	}
	return hw.Stop(), true
}
