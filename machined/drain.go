package main

import (
	"time"

	"github.com/cairn-os/cairn/machined/internal/node"
)

// apiDrainWait bounds how long a reboot or power-off waits for the machine API's calls to end. Streams
// that follow the node (logs -f, events) do not end by themselves; they are cut when it passes.
const apiDrainWait = 3 * time.Second

// drainFirst stops the machine API gracefully before the machine reboots or powers off. The RPC that asked
// for it has returned by then, but its answer may still sit in the node's socket buffers: reboot(2) at that
// moment drops it, and the client (behind QEMU's user network, or any NAT that keeps the connection open)
// waits for an answer that never comes. A graceful stop flushes every answer first.
type drainFirst struct {
	node.System
	drain func(time.Duration)
}

func (d drainFirst) Reboot() error {
	d.drain(apiDrainWait)
	return d.System.Reboot()
}

func (d drainFirst) PowerOff() error {
	d.drain(apiDrainWait)
	return d.System.PowerOff()
}
