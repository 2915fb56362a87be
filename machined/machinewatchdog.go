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

// watchdogTimeout is what the watchdog is set to: a node whose state machine does not answer
// for this long is reset. Generous, because under emulation a busy node can stall for seconds.
const watchdogTimeout = 60 * time.Second

// machineWatchdog arms the machine's watchdog once the kernel modules are loaded (its driver is one),
// and pets it while the node answers. A machine with no hardware watchdog gets the kernel's software one
// (softdog): a kernel whose CPUs are stuck but still take timer interrupts (the soft lockups seen under
// emulation) restarts the machine, and the node boots back to where its lock says. A kernel that stops
// taking interrupts stops its software watchdog too; only hardware resets that one.
type machineWatchdog struct {
	armed atomic.Pointer[watchdog.Machine] // nil until the device is open
}

// run arms and pets the watchdog: the hardware's, else the one soft loads; it returns at once on a
// machine where neither opens.
func (w *machineWatchdog) run(modules <-chan struct{}, soft func(), n *node.Node, log *slog.Logger, bus *events.Bus) {
	<-modules
	software := false
	dev, timeout, err := sys.OpenWatchdog(sys.WatchdogDevice, watchdogTimeout)
	if errors.Is(err, fs.ErrNotExist) {
		soft()
		software = true
		dev, timeout, err = sys.OpenWatchdog(sys.WatchdogDevice, watchdogTimeout)
	}
	if errors.Is(err, fs.ErrNotExist) {
		log.Info("watchdog: this machine has no watchdog")
		return
	}
	if dev == nil {
		log.Error("watchdog: open "+sys.WatchdogDevice, "error", err)
		return
	}
	if err != nil {
		log.Warn("watchdog", "error", err)
	}
	m := &watchdog.Machine{Dev: dev, Timeout: timeout, Log: log, Software: software}
	w.armed.Store(m)
	bus.Publish(events.Event{Kind: events.KindWatchdog, Outcome: "armed",
		Message: m.Armed() + ": the machine resets when the node does not answer for " + timeout.String()})
	m.Run(context.Background(), func() { n.Status() })
}

// stop is the WatchdogStop RPC's: false when no watchdog is armed.
func (w *machineWatchdog) stop() (time.Duration, bool) {
	m := w.armed.Load()
	if m == nil {
		return 0, false
	}
	return m.Stop(), true
}
