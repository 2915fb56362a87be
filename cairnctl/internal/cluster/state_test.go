package cluster

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

func testState(t *testing.T, name string) *State {
	t.Helper()
	l, err := Plan(name, 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &State{Name: name, Created: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), Mode: qemu.ModeVmlinux, Group: l.Group}
	for i, n := range l.Nodes {
		s.Nodes = append(s.Nodes, NodeState{Node: n, Memory: 1024, CPUs: 2, Token: "t" + n.Name,
			Ports: map[int]int{qemu.APIPort: 40000 + 10*i, qemu.ProbePort: 40001 + 10*i, KubePort: 40002 + 10*i, JoinPort: 40003 + 10*i}})
	}
	return s
}

func TestStateRoundTrip(t *testing.T) {
	root := t.TempDir()
	want := testState(t, "rt")
	dir := Dir(root, want.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := want.Save(dir); err != nil {
		t.Fatalf("Save() = %v", err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Load(Save(s)) (-want +got):\n%s", diff)
	}
	if got.Nodes[1].APIEndpoint() != "127.0.0.1:40010" {
		t.Errorf("APIEndpoint() = %s, want 127.0.0.1:40010", got.Nodes[1].APIEndpoint())
	}
	fi, err := os.Stat(filepath.Join(dir, StateFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode = %v, %v; want 0600 (it holds bootstrap tokens)", fi.Mode().Perm(), err)
	}
}

func TestListAndInspect(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"beta", "alpha"} {
		s := testState(t, name)
		if err := os.MkdirAll(Dir(root, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(Dir(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A create that died before writing its state file still shows up.
	if err := os.MkdirAll(Dir(root, "broken"), 0o700); err != nil {
		t.Fatal(err)
	}
	infos, err := Inspect(root)
	if err != nil {
		t.Fatalf("Inspect() = %v", err)
	}
	var names []string
	for _, ci := range infos {
		names = append(names, ci.Name)
	}
	if diff := cmp.Diff([]string{"alpha", "beta", "broken"}, names); diff != "" {
		t.Errorf("Inspect() names (-want +got):\n%s", diff)
	}
	if infos[2].Error == "" {
		t.Errorf("Inspect() of a directory without state: no error reported")
	}
	n := infos[0].Nodes[0]
	if n.Running || n.PID != 0 {
		t.Errorf("node %s without a QEMU: running=%v pid=%d, want stopped", n.Name, n.Running, n.PID)
	}
	if n.APIEndpoint != "127.0.0.1:40000" || !strings.HasSuffix(n.Console, filepath.Join("nodes", "alpha-cp1", "console.log")) {
		t.Errorf("node info = %+v, want the API endpoint and console path filled in", n)
	}
	if infos, err := Inspect(filepath.Join(root, "none")); err != nil || len(infos) != 0 {
		t.Errorf("Inspect(missing root) = %v, %v; want nothing and no error", infos, err)
	}
}

// Destroy removes a cluster whose VMs are gone (a pid file that no process holds is stale), and
// refuses a name that does not exist.
func TestDestroyStopped(t *testing.T) {
	root := t.TempDir()
	s := testState(t, "gone")
	dir := Dir(root, s.Name)
	for _, n := range s.Nodes {
		nd := NodeDir(dir, n.Name)
		if err := os.MkdirAll(nd, 0o700); err != nil {
			t.Fatal(err)
		}
		// The pid of this test process: Destroy must not signal it, since no QEMU holds the file.
		if err := os.WriteFile(filepath.Join(nd, qemu.PIDFile), []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Destroy(context.Background(), root, s.Name, NewProgress(&out)); err != nil {
		t.Fatalf("Destroy() = %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Destroy() left %s: %v", dir, err)
	}
	if !strings.Contains(out.String(), "gone-cp1: QEMU is not running") {
		t.Errorf("Destroy() output lacks the stopped node:\n%s", out.String())
	}
	err := Destroy(context.Background(), root, "nosuch", nil)
	if err == nil || !strings.Contains(err.Error(), "no cluster nosuch") {
		t.Errorf("Destroy(nosuch) = %v, want an error naming it", err)
	}
}
