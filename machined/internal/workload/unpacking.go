package workload

import (
	"github.com/cairn-os/cairn/machined/internal/cgroups"
)

// Unpacking lowers the runtime's CPU weight while containerd unpacks an image archive a user imports,
// and returns what restores it: at its usual weight an unpack on two threads starves a small control
// plane (cgroups.RuntimeUnpacking says what it did). The images service imports one archive at a time,
// so there is no second caller to count. A sandbox node's cgroups are its host's, and a node whose
// containerd got no group of its own (its log said so) has no weight to change: nothing is done.
func (w *Workload) Unpacking() (done func()) {
	if w.Sandbox {
		return func() {}
	}
	h := w.cgroupHierarchy()
	if !h.Has(cgroups.Containerd()) {
		return func() {}
	}
	if _, err := h.Make(cgroups.RuntimeUnpacking()); err != nil {
		w.Log.Warn("containerd unpacks at its usual CPU weight: the pods may lose CPU time to it", "err", err)
		return func() {}
	}
	return func() {
		if _, err := h.Make(cgroups.Runtime()); err != nil {
			w.Log.Warn("containerd keeps the lower CPU weight of an unpack: pods start more slowly", "err", err)
		}
	}
}
