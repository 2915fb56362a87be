package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeRoot lays out the files of a cgroup v2 root whose kernel offers controllers.
func fakeRoot(t *testing.T, controllers, enabled string) string {
	t.Helper()
	root := t.TempDir()
	for name, value := range map[string]string{"cgroup.controllers": controllers, "cgroup.subtree_control": enabled} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(value), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestMake(t *testing.T) {
	tests := []struct {
		name, controllers, enabled string
		wantEnable                 string // written to the root's subtree_control; "" for nothing written
	}{
		{"fresh boot", "cpuset cpu io memory hugetlb pids rdma misc", "", "+cpu +memory +io +pids"},
		{"kubelet enabled some", "cpu io memory pids", "cpu memory", "+io +pids"},
		{"no io controller", "cpu memory pids", "", "+cpu +memory +pids"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeRoot(t, tt.controllers, tt.enabled)
			dir, err := Hierarchy{Root: root}.Make(Group{Path: "runtime", CPUWeight: 25})
			if err != nil {
				t.Fatalf("Make: %v", err)
			}
			if want := filepath.Join(root, "runtime"); dir != want {
				t.Errorf("Make = %s, want %s", dir, want)
			}
			if got := read(t, filepath.Join(dir, "cpu.weight")); got != "25" {
				t.Errorf("cpu.weight = %q, want 25", got)
			}
			got := read(t, filepath.Join(root, "cgroup.subtree_control"))
			want := tt.wantEnable
			if want == "" {
				want = tt.enabled
			}
			if got != want {
				t.Errorf("root cgroup.subtree_control = %q, want %q", got, want)
			}
		})
	}
}

func TestMakeAgainSetsWeight(t *testing.T) {
	root := fakeRoot(t, "cpu memory", "cpu memory")
	h := Hierarchy{Root: root}
	if _, err := h.Make(Group{Path: "runtime", CPUWeight: 25}); err != nil {
		t.Fatal(err)
	}
	dir, err := h.Make(Group{Path: "runtime", CPUWeight: 40})
	if err != nil {
		t.Fatalf("second Make: %v", err)
	}
	if got := read(t, filepath.Join(dir, "cpu.weight")); got != "40" {
		t.Errorf("cpu.weight = %q, want 40", got)
	}
}

func TestMakeRefuses(t *testing.T) {
	tests := []struct {
		name        string
		controllers string
		g           Group
		want        string
	}{
		{"no cpu controller", "memory pids", Group{Path: "runtime", CPUWeight: 25}, "no cpu controller"},
		{"weight 0", "cpu", Group{Path: "runtime", CPUWeight: 0}, "outside 1-10000"},
		{"weight too big", "cpu", Group{Path: "runtime", CPUWeight: 10001}, "outside 1-10000"},
		{"absolute path", "cpu", Group{Path: "/runtime", CPUWeight: 25}, "relative path"},
		{"escapes the root", "cpu", Group{Path: "../runtime", CPUWeight: 25}, "relative path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeRoot(t, tt.controllers, "")
			_, err := Hierarchy{Root: root}.Make(tt.g)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Make(%+v) = %v, want an error containing %q", tt.g, err, tt.want)
			}
			if _, err := os.Stat(filepath.Join(root, "runtime")); err == nil {
				t.Errorf("Make made the group although it failed")
			}
		})
	}
}

func TestMakeWithoutCgroup2(t *testing.T) {
	_, err := Hierarchy{Root: t.TempDir()}.Make(Runtime())
	if err == nil || !strings.Contains(err.Error(), "no cgroup v2 hierarchy") {
		t.Fatalf("Make on a directory that is no cgroup v2 root = %v, want it refused", err)
	}
}

// containerd's group sits in the runtime's: the runtime's weight is what the pods compete with, and
// the controllers are enabled in the runtime's group for its children.
func TestMakeContainerdInRuntime(t *testing.T) {
	root := fakeRoot(t, "cpu memory pids", "")
	h := Hierarchy{Root: root}
	if _, err := h.Make(Runtime()); err != nil {
		t.Fatal(err)
	}
	// What the kernel does for a new group: it offers the controllers its parent enabled.
	if err := os.WriteFile(filepath.Join(root, "runtime", "cgroup.controllers"), []byte("cpu memory pids"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := h.Make(Containerd())
	if err != nil {
		t.Fatalf("Make(Containerd()): %v", err)
	}
	if want := filepath.Join(root, "runtime", "containerd"); dir != want {
		t.Errorf("Make(Containerd()) = %s, want %s", dir, want)
	}
	if got := read(t, filepath.Join(root, "runtime", "cpu.weight")); got != "100" {
		t.Errorf("runtime cpu.weight = %q, want 100", got)
	}
	if got := read(t, filepath.Join(root, "runtime", "cgroup.subtree_control")); got != "+cpu +memory +pids" {
		t.Errorf("runtime cgroup.subtree_control = %q, want the controllers enabled for containerd", got)
	}
}

// The shims' group is a top-level group, not below Runtime: nested, it would share Runtime's weight with
// containerd, low while containerd unpacks, and a starved shim is what left an exited controller-manager
// unhandled.
func TestShimsBesideRuntime(t *testing.T) {
	root := fakeRoot(t, "cpu memory pids", "")
	dir, err := Hierarchy{Root: root}.Make(Shims())
	if err != nil {
		t.Fatalf("Make(Shims()): %v", err)
	}
	if filepath.Dir(dir) != root {
		t.Errorf("Make(Shims()) = %s, want a group directly below the root %s", dir, root)
	}
	got, err := strconv.Atoi(read(t, filepath.Join(dir, "cpu.weight")))
	if err != nil || got <= RuntimeUnpacking().CPUWeight {
		t.Errorf("shims cpu.weight = %d (%v), want more than the runtime's %d while it unpacks", got, err, RuntimeUnpacking().CPUWeight)
	}
}

// An unpack lowers the runtime's weight and its end raises it again: the same group, its weight alone
// rewritten, containerd's group below it untouched.
func TestRuntimeUnpackingReweighs(t *testing.T) {
	root := fakeRoot(t, "cpu memory pids", "")
	h := Hierarchy{Root: root}
	runtime, err := h.Make(Runtime())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runtime, "cgroup.controllers"), []byte("cpu memory pids"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctrd, err := h.Make(Containerd())
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		g    Group
		want string
	}{{RuntimeUnpacking(), "25"}, {Runtime(), "100"}} {
		dir, err := h.Make(step.g)
		if err != nil {
			t.Fatalf("Make(%+v): %v", step.g, err)
		}
		if dir != runtime {
			t.Errorf("Make(%+v) = %s, want the runtime's group %s", step.g, dir, runtime)
		}
		if got := read(t, filepath.Join(runtime, "cpu.weight")); got != step.want {
			t.Errorf("after Make(%+v): runtime cpu.weight = %q, want %s", step.g, got, step.want)
		}
		if got := read(t, filepath.Join(ctrd, "cpu.weight")); got != "100" {
			t.Errorf("after Make(%+v): containerd's cpu.weight = %q, want 100 (untouched)", step.g, got)
		}
	}
}
