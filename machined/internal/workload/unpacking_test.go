package workload

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/machined/internal/cgroups"
	"github.com/cairn-os/cairn/machined/internal/paths"
)

// cgroupRoot lays out a cgroup v2 root under a node root, as the kernel shows it to machined.
func cgroupRoot(t *testing.T) (paths.Paths, string) {
	t.Helper()
	p := paths.Paths{Root: t.TempDir()}
	root := p.Join("sys", "fs", "cgroup")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu memory pids"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, root
}

func weight(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cpu.weight"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// runtimeGroups makes the runtime's and containerd's groups as containerd's start does.
func runtimeGroups(t *testing.T, root string) {
	t.Helper()
	h := cgroups.Hierarchy{Root: root}
	runtime, err := h.Make(cgroups.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runtime, "cgroup.controllers"), []byte("cpu memory pids"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Make(cgroups.Containerd()); err != nil {
		t.Fatal(err)
	}
}

func TestUnpacking(t *testing.T) {
	tests := []struct {
		name            string
		sandbox, groups bool
		during          string // the runtime's cpu.weight during the unpack; "" for no group
	}{
		{"node", false, true, "25"},
		// A sandbox node's cgroups are its host's.
		{"sandbox node", true, true, "100"},
		// The kernel gave containerd no group: none is made for the unpack.
		{"no runtime group", false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, root := cgroupRoot(t)
			runtime := filepath.Join(root, cgroups.Runtime().Path)
			if tt.groups {
				runtimeGroups(t, root)
			}
			w := &Workload{Paths: p, Sandbox: tt.sandbox, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			done := w.Unpacking()
			if tt.during == "" {
				done()
				if _, err := os.Stat(runtime); !os.IsNotExist(err) {
					t.Errorf("Unpacking made the runtime's group (%v), want nothing made", err)
				}
				return
			}
			if got := weight(t, runtime); got != tt.during {
				t.Errorf("while unpacking: runtime cpu.weight = %s, want %s", got, tt.during)
			}
			done()
			if got := weight(t, runtime); got != "100" {
				t.Errorf("after the unpack: runtime cpu.weight = %s, want 100", got)
			}
		})
	}
}
