package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// Create refuses before it starts anything: a cluster that exists (and says how to remove it), a
// missing image (and says how to build it), a bad name.
func TestCreateRefuses(t *testing.T) {
	root := t.TempDir()
	img := t.TempDir()
	touch(t, filepath.Join(img, "vmlinux"))
	touch(t, filepath.Join(img, "initramfs.cpio.zst"))
	if err := os.MkdirAll(Dir(root, "taken"), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    CreateOptions
		want string
	}{
		{"exists", CreateOptions{Name: "taken", Root: root, ImageDir: img, ControlPlanes: 1},
			"cairnctl cluster destroy --name taken --state-dir " + root},
		{"no image", CreateOptions{Name: "fresh", Root: root, ImageDir: filepath.Join(root, "none"), ControlPlanes: 1}, "make image"},
		{"no ISO", CreateOptions{Name: "fresh", Root: root, ImageDir: img, Mode: qemu.ModeISO, ControlPlanes: 1}, "cairn.iso is missing"},
		{"bad name", CreateOptions{Name: "Fresh", Root: root, ImageDir: img, ControlPlanes: 1}, "lowercase"},
		{"no control plane", CreateOptions{Name: "fresh", Root: root, ImageDir: img}, "at least one control plane"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Create(context.Background(), tt.o, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Create() = %v, want an error with %q", err, tt.want)
			}
			if _, err := os.Stat(Dir(root, "fresh")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused Create left %s behind", Dir(root, "fresh"))
			}
		})
	}
}

func TestCreateNodeResources(t *testing.T) {
	o := CreateOptions{DiskFiles: map[string]string{SerialEtcd: "/tmp/foreign.raw", "zz-data": "/tmp/z.raw", "aa-data": "/tmp/a.raw"}}.withDefaults()
	cp := Node{Name: "c-cp1", Role: RoleControlPlane}
	w := Node{Name: "c-w1", Role: RoleWorker}
	if got := o.memory(RoleControlPlane); got != 2048 {
		t.Errorf("memory(controlplane) = %d, want 2048", got)
	}
	if got := o.memory(RoleWorker); got != 1024 {
		t.Errorf("memory(worker) = %d, want 1024", got)
	}
	if got := (CreateOptions{Memory: 3000}).memory(RoleWorker); got != 3000 {
		t.Errorf("memory with --memory 3000 = %d, want 3000", got)
	}
	tests := []struct {
		name  string
		n     Node
		first bool
		want  []qemu.Disk
	}{
		{"first control plane", cp, true, []qemu.Disk{
			{Serial: SerialState, Size: 1 << 30}, {Serial: SerialEphemeral, Size: 8 << 30}, {Serial: SerialEtcd, Size: 2 << 30, File: "/tmp/foreign.raw"},
			{Serial: "aa-data", File: "/tmp/a.raw"}, {Serial: "zz-data", File: "/tmp/z.raw"}}},
		{"other control plane", cp, false, []qemu.Disk{
			{Serial: SerialState, Size: 1 << 30}, {Serial: SerialEphemeral, Size: 8 << 30}, {Serial: SerialEtcd, Size: 2 << 30}}},
		{"worker: no etcd disk", w, false, []qemu.Disk{{Serial: SerialState, Size: 1 << 30}, {Serial: SerialEphemeral, Size: 8 << 30}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, o.disks(tt.n, tt.first)); diff != "" {
			t.Errorf("disks(%s) (-want +got):\n%s", tt.name, diff)
		}
	}
}

// --merge adds the cluster's context to the user's cairnconfig, keeping the contexts already there.
func TestMergeContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "config")
	a := &client.Context{Endpoints: []string{"127.0.0.1:1"}, CA: "a"}
	b := &client.Context{Endpoints: []string{"127.0.0.1:2"}, CA: "b"}
	if err := mergeContext(p, "alpha", a); err != nil {
		t.Fatalf("mergeContext(new file) = %v", err)
	}
	if err := mergeContext(p, "beta", b); err != nil {
		t.Fatalf("mergeContext(existing file) = %v", err)
	}
	cc, err := client.LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Context != "beta" || len(cc.Contexts) != 2 || cc.Contexts["alpha"].CA != "a" {
		t.Errorf("merged cairnconfig = current %q, %d contexts, want beta current and alpha kept", cc.Context, len(cc.Contexts))
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cairnconfig mode = %v, %v; want 0600 (it holds a private key)", fi.Mode().Perm(), err)
	}
}
