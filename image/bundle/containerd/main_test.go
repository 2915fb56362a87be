package main

import (
	"slices"
	"testing"

	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
)

func TestRunsShim(t *testing.T) {
	tests := []struct {
		argv []string
		want bool
	}{
		{[]string{"/usr/bin/containerd", "--config", "/etc/containerd/config.toml"}, false},
		{[]string{"containerd"}, false},
		{[]string{"/usr/bin/containerd", "--address", "/run/containerd/containerd.sock", "publish", "--topic", "/tasks/exit"}, false},
		// containerd runs the shim through PATH for start and delete.
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-address", "a", "-publish-binary", "/usr/bin/containerd", "-id", "x", "start"}, true},
		{[]string{"containerd-shim-runc-v2", "-v"}, true},
		// The shim's start re-executes /proc/self/exe: this binary's own name.
		{[]string{"/usr/bin/containerd", "-namespace", "k8s.io", "-id", "x", "-address", "a"}, true},
		{nil, false},
	}
	for _, tt := range tests {
		if got := runsShim(tt.argv); got != tt.want {
			t.Errorf("runsShim(%q) = %v, want %v", tt.argv, got, tt.want)
		}
	}
}

func uris() []string {
	var out []string
	for _, r := range registry.Graph(func(*plugin.Registration) bool { return false }) {
		out = append(out, r.URI())
	}
	return out
}

// TestKeepPlugins checks the split of the registry: the shim keeps only its
// task service, the daemon everything else (its CRI among them).
func TestKeepPlugins(t *testing.T) {
	full := registry.Graph(func(*plugin.Registration) bool { return false })
	restore := func() {
		registry.Reset()
		for i := range full {
			r := full[i]
			registry.Register(&r)
		}
	}
	t.Cleanup(restore)
	all := uris()

	keepPlugins(true)
	if got, want := uris(), []string{"io.containerd.ttrpc.v1.task"}; !slices.Equal(got, want) {
		t.Errorf("shim plugins = %q, want %q", got, want)
	}
	restore()
	keepPlugins(false)
	daemon := uris()
	for _, p := range []string{"io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.overlayfs", "io.containerd.runtime.v2.task"} {
		if !slices.Contains(daemon, p) {
			t.Errorf("daemon plugins lack %s: %q", p, daemon)
		}
	}
	// All but the shim's task service.
	want := slices.DeleteFunc(slices.Sorted(slices.Values(all)), func(u string) bool { return u == "io.containerd.ttrpc.v1.task" })
	if got := slices.Sorted(slices.Values(daemon)); !slices.Equal(got, want) {
		t.Errorf("daemon plugins = %q, want %q", got, want)
	}
}
