package node

import (
	"context"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/sequence"
)

// Hooks are the tasks other subsystems add to the node's sequences. The node stays small and each
// subsystem keeps its tasks beside its own code. A nil hook adds nothing.
type Hooks struct {
	// Preflight checks a config against the machine before the node lock is taken (the disk plan), so a
	// refused Init or Join changes nothing.
	Preflight func(ctx context.Context, c *config.MachineConfig) error
	// Network applies the machine config's network (addresses, routes, bonds, VLANs, resolvers) over what
	// the boot configured. It runs in Init, Join and Start right after the API switches to mutual TLS;
	// what it cannot apply it reports (status, console) without failing the sequence, so the node stays
	// reachable on what works. Nil where the node does not own the network (sandbox mode).
	Network func(ctx context.Context, c *config.MachineConfig) error
	// Time starts keeping the clock from the config's time servers and waits (bounded) for a first answer,
	// right after Network: certificates are checked and issued after it. Nil where the node does not own
	// the clock (sandbox mode).
	Time func(ctx context.Context, c *config.MachineConfig) error
	// Storage plans, formats and mounts the node's volumes. It runs first in Init, Join and Start, before
	// anything is written to STATE. Its tasks call stateAt with the directory STATE lives in once they
	// know it (found or mounted).
	Storage func(c *config.MachineConfig, seq fsm.Sequence, stateAt func(dir string)) []sequence.Task
	// Workload brings up the node's services (containerd, kubelet, the control plane) on a configured node.
	Workload func(c *config.MachineConfig, seq fsm.Sequence) []sequence.Task
	// Stop stops services and unmounts volumes before a reboot, shutdown or reset.
	Stop func(seq fsm.Sequence) []sequence.Task
	// Leave takes the node out of its cluster in a graceful reset, after Drain (its Node marked left, its
	// etcd member removed): the steps that cannot be undone.
	Leave func() []sequence.Task
	// Drain moves the node's work elsewhere (cordon, drain) before a graceful reset's Leave. (Upgrades do
	// not drain yet: see UpgradeReboot.)
	Drain func() []sequence.Task
	// Wipe erases the named volumes after they are unmounted (reset).
	Wipe func(c *config.MachineConfig, volumes []string) []sequence.Task
	// Measure measures the node lock (its cluster and role) into the TPM, once STATE, which keeps the
	// measurement log, is on its disk; it runs in Init, Join and every Start. Nil where the node does not
	// own a TPM (sandbox mode). It fails only when the TPM disagrees with the log and the config does not
	// say to continue.
	Measure func(ctx context.Context, c *config.MachineConfig, stateDir string) error
	// Reconfigure applies a changed config's live changes to the running workload (config.Changes lists
	// them), re-rendering and restarting what reads them, each checked healthy before the next.
	Reconfigure func(ctx context.Context, c *config.MachineConfig, changes []config.Change, progress func(string)) error
	// Running is the work a node does while it is Running (certificate renewal, discovery names). It
	// starts each time the node enters Running; ctx ends when a reboot, shutdown or reset begins or
	// machined stops, and Running must then return.
	Running func(ctx context.Context, c *config.MachineConfig)
}

func (h Hooks) storage(c *config.MachineConfig, seq fsm.Sequence, stateAt func(dir string)) []sequence.Task {
	if h.Storage == nil {
		return nil
	}
	return h.Storage(c, seq, stateAt)
}

// network lists the network and time tasks, those of the hooks that are set.
func (h Hooks) network(c *config.MachineConfig) []sequence.Task {
	var tasks []sequence.Task
	if h.Network != nil {
		tasks = append(tasks, sequence.Task{Name: "network", Run: func(ctx context.Context) error { return h.Network(ctx, c) }})
	}
	if h.Time != nil {
		tasks = append(tasks, sequence.Task{Name: "time", Run: func(ctx context.Context) error { return h.Time(ctx, c) }})
	}
	return tasks
}

func (h Hooks) workload(c *config.MachineConfig, seq fsm.Sequence) []sequence.Task {
	if h.Workload == nil {
		return nil
	}
	return h.Workload(c, seq)
}

func (h Hooks) stop(seq fsm.Sequence) []sequence.Task {
	if h.Stop == nil {
		return nil
	}
	return h.Stop(seq)
}

func (h Hooks) preflight(ctx context.Context, c *config.MachineConfig) error {
	if h.Preflight == nil {
		return nil
	}
	return h.Preflight(ctx, c)
}

func (h Hooks) leave() []sequence.Task {
	if h.Leave == nil {
		return nil
	}
	return h.Leave()
}

func (h Hooks) drain() []sequence.Task {
	if h.Drain == nil {
		return nil
	}
	return h.Drain()
}

func (h Hooks) wipe(c *config.MachineConfig, volumes []string) []sequence.Task {
	if h.Wipe == nil {
		return nil
	}
	return h.Wipe(c, volumes)
}
