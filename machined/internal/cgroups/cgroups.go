// Package cgroups gives the node's own daemons cgroup v2 groups of their own, so that under contention
// each weighs what its work is worth against the pods (the control plane's static pods among them).
//
// Why: a process machined starts lands in the root cgroup, where each of its busy threads weighs as
// much as a whole top-level group (a nice-0 thread and a cpu.weight of 100 get the same share). The
// kubelet gives kubepods a weight from the node's CPUs (79 on two), so containerd unpacking an image
// archive on two threads took most of a two-vCPU control plane: the API server failed its liveness
// probe and was restarted, and the controller-manager and the scheduler lost their leases. Weights
// only divide CPU time that is short; an idle control plane leaves containerd all of it.
//
// A Group is plain data until Make writes it under a cgroup v2 mount.
package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Group is one cgroup machined makes.
type Group struct {
	// Path is below the cgroup root, e.g. "runtime".
	Path string
	// CPUWeight is the group's cpu.weight (1-10000; the kernel's default is 100).
	CPUWeight int
}

// Runtime is the group of the node's runtime: containerd, with the CNI plugins it runs (they inherit
// its group; its shims move to Shims, and the containers they start go to the kubelet's pod cgroups).
// Containerd's own group is a child, because cgroup v2 lets only a group without processes of its own
// divide a controller among children, and the kubelet may join it there.
//
// Its weight is the kernel's default, the kubelet's: every pod's start waits on containerd, which
// creates the pod's network namespace and runs the CNI plugins before the pod's sandbox starts. At a
// quarter of that weight (RuntimeUnpacking's), on an emulated control plane whose pods keep its two
// CPUs busy, that step took 10.4-16.6 s for each CoreDNS pod; at the default weight 2.7-8.0 s (eight
// cluster creates, alternating the two weights, 2026-12-03). Only an image unpack, which can take both
// CPUs for minutes, needs the lower weight: see RuntimeUnpacking.
//
// The kubelet stays in its container's own group, at the default weight: moved into Runtime on a busy
// emulated control plane, it answered its own probes late and restarted flannel twice for failed
// liveness checks (1 s timeouts).
func Runtime() Group { return Group{Path: "runtime", CPUWeight: 100} }

// RuntimeUnpacking is Runtime's weight while containerd unpacks an image archive a user imports. A
// weight of 25 against kubepods' 79 on two CPUs leaves containerd a quarter of the CPU while the pods
// want all of it: enough to unpack, not enough to starve etcd and the API server. Unpacking at a full
// weight on two threads took most of a two-vCPU control plane: the API server failed its liveness
// probe and was restarted, and the controller-manager and the scheduler lost their leases. The node's
// own images need no such care: the boot imports them before it starts the kubelet. An image the
// kubelet pulls from a registry (Cairn is air-gapped unless the machine config names one) is unpacked
// at Runtime's weight: containerd pulls for the CRI without telling machined.
func RuntimeUnpacking() Group { return Group{Path: "runtime", CPUWeight: 25} }

// Shims is the group of containerd's shims, with the runc they run: a top-level group at the kernel's
// default weight, beside Runtime rather than in it. Starting a container, and deleting one that exited,
// is a call from containerd to the pod's shim, which runs runc; containerd gives the call seconds. In
// Runtime, when its weight was 25, on an emulated control plane whose CPUs are busy even when idle, the
// shim of a controller-manager that had lost its lease could not delete the exited container in time,
// again and again: containerd never handled the exit, the kubelet saw the container Running and never
// restarted it, and nothing in the cluster reconciled any more. A shim is idle between calls, so its
// weight costs the pods nothing until a container starts or stops; containerd's own work (the CNI
// plugins, an unpack) stays at Runtime's weight. containerd places each shim here (runc's ShimCgroup
// option).
func Shims() Group { return Group{Path: "shims", CPUWeight: 100} }

// Containerd is containerd's group in Runtime.
func Containerd() Group { return Group{Path: "runtime/containerd", CPUWeight: 100} }

// Hierarchy is a mounted cgroup v2 hierarchy.
type Hierarchy struct {
	// Root is where it is mounted: /sys/fs/cgroup on a node.
	Root string
}

// Make creates g (and its parents), enables the CPU controller on the way down from the root, and sets
// the weight. It returns the group's directory, to start a process in it (clone3's CLONE_INTO_CGROUP,
// os/exec's SysProcAttr.UseCgroupFD). Making a group that exists only sets its weight again.
func (h Hierarchy) Make(g Group) (string, error) {
	if g.Path == "" || filepath.IsAbs(g.Path) || strings.Contains(g.Path, "..") {
		return "", fmt.Errorf("cgroup %q: want a relative path below the root", g.Path)
	}
	if g.CPUWeight < 1 || g.CPUWeight > 10000 {
		return "", fmt.Errorf("cgroup %s: cpu.weight %d is outside 1-10000", g.Path, g.CPUWeight)
	}
	if _, err := os.Stat(filepath.Join(h.Root, "cgroup.controllers")); err != nil {
		return "", fmt.Errorf("no cgroup v2 hierarchy at %s: %w", h.Root, err)
	}
	dir := h.Root
	for _, part := range strings.Split(filepath.Clean(g.Path), string(filepath.Separator)) {
		if err := h.enable(dir); err != nil {
			return "", err
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("cgroup %s: %w", g.Path, err)
		}
	}
	if err := write(filepath.Join(dir, "cpu.weight"), strconv.Itoa(g.CPUWeight)); err != nil {
		return "", fmt.Errorf("cgroup %s: %w", g.Path, err)
	}
	return dir, nil
}

// Has says whether g's directory exists under the hierarchy.
func (h Hierarchy) Has(g Group) bool {
	fi, err := os.Stat(filepath.Join(h.Root, g.Path))
	return err == nil && fi.IsDir()
}

// enable turns on, for dir's children, the controllers dir has that are not on yet. The CPU controller
// is required (a weight needs it); the others are enabled when the kernel has them.
func (h Hierarchy) enable(dir string) error {
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	on, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	available := strings.Fields(string(have))
	enabled := strings.Fields(string(on))
	var add []string
	// CPU for the weights; memory, I/O and PIDs for accounting (the kubelet's summary of the runtime).
	for _, c := range []string{"cpu", "memory", "io", "pids"} {
		switch {
		case slices.Contains(enabled, c):
		case slices.Contains(available, c):
			add = append(add, "+"+c)
		case c == "cpu":
			return fmt.Errorf("cgroup %s: the kernel offers no cpu controller (it has %q)", dir, strings.TrimSpace(string(have)))
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := write(filepath.Join(dir, "cgroup.subtree_control"), strings.Join(add, " ")); err != nil {
		return fmt.Errorf("cgroup %s: enable %s: %w", dir, strings.Join(add, " "), err)
	}
	return nil
}

// write writes a cgroup interface file. The kernel's files exist and take one write each; a plain file
// (unit tests) is created.
func write(path, value string) error {
	return os.WriteFile(path, []byte(value), 0o644)
}
