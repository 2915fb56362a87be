package main

import (
	"log/slog"

	"github.com/cairn-os/cairn/machined/internal/cgroups"
)

// memoryAccountingAtStart makes the runtime's cgroup while the node's CPUs have nothing else to do, at
// the start of PID 1, so that the memory controller's first group exists before anything is busy.
//
// Why: the first memory cgroup below the root switches the kernel's memory accounting on, and the kernel
// does that by rewriting, live, the no-op at the head of its slab allocator's accounting branch on every
// call site (an int3 first, then the other bytes). Made at containerd's start in Init, as it was, that
// rewrite raced the other vCPU, which was allocating: twice under TCG (about one create in seventy) both
// vCPUs hung for good at kmem_cache_alloc_node+0x65, in the middle of that 5-byte no-op, one of them in
// the int3 handler; one node stayed down until its hardware watchdog reset it, the other for good. Here the other vCPU
// is idle, so nothing runs the code being rewritten. The group is the one containerd is started in later
// (cgroups.Runtime); making it again there only sets its weight. It costs 14 ms of the boot under TCG
// (one boot, 2026-12-04: the rewrite's cross-CPU synchronisation).
func memoryAccountingAtStart(log *slog.Logger) {
	if _, err := (cgroups.Hierarchy{Root: "/sys/fs/cgroup"}).Make(cgroups.Runtime()); err != nil {
		// Not fatal: containerd's start makes the group later, as it did before.
		log.Warn("the runtime's cgroup is made later, at containerd's start", "error", err)
	}
}
