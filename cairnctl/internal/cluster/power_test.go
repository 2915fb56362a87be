package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodeDisks(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{"foreign", SerialEtcd, SerialState, SerialEphemeral} {
		if err := os.WriteFile(filepath.Join(dir, "disk-"+s+".raw"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := nodeDisks(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range d {
		got = append(got, x.Serial)
		if x.File != filepath.Join(dir, "disk-"+x.Serial+".raw") {
			t.Errorf("disk %s file %s, want the existing one", x.Serial, x.File)
		}
	}
	if diff := cmp.Diff([]string{SerialState, SerialEphemeral, SerialEtcd, "foreign"}, got); diff != "" {
		t.Errorf("nodeDisks() serials (-want +got):\n%s", diff)
	}
	if _, err := nodeDisks(t.TempDir()); err == nil {
		t.Error("nodeDisks() of a directory without disks = nil, want an error")
	}
}

func TestPowerSelectsNodes(t *testing.T) {
	root := t.TempDir()
	st := &State{Name: "dev", Nodes: []NodeState{{Node: Node{Name: "dev-cp1"}}, {Node: Node{Name: "dev-w1"}}}}
	if err := os.MkdirAll(Dir(root, "dev"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := st.Save(Dir(root, "dev")); err != nil {
		t.Fatal(err)
	}
	err := PowerOff(context.Background(), PowerOptions{Name: "dev", Root: root, Nodes: []string{"dev-w2"}}, NewProgress(nil))
	if err == nil || !strings.Contains(err.Error(), "has no node dev-w2 (it has dev-cp1, dev-w1)") {
		t.Errorf("PowerOff(an unknown node) = %v, want the nodes listed", err)
	}
	if err := PowerOff(context.Background(), PowerOptions{Name: "nope", Root: root}, NewProgress(nil)); err == nil || !strings.Contains(err.Error(), "no cluster nope") {
		t.Errorf("PowerOff(an unknown cluster) = %v, want it named", err)
	}
	// Nodes whose QEMU does not run are already off: nothing to do, no error.
	if err := PowerOff(context.Background(), PowerOptions{Name: "dev", Root: root}, NewProgress(nil)); err != nil {
		t.Errorf("PowerOff(stopped nodes) = %v", err)
	}
}
