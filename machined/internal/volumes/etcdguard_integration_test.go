//go:build integration

package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/paths"
)

// TestEtcdGuardOnRealMounts runs the guard against the kernel's mount table: a plain directory and a
// filesystem from no Cairn disk are refused, a tmpfs is accepted only when the config asks for one. (A
// Cairn etcd partition is the e2e suite's: this host's kernel makes no partition devices for a GPT.)
func TestEtcdGuardOnRealMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tmpfs")
	}
	root := t.TempDir()
	target := filepath.Join(root, "var", "lib", "etcd")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	m := &Manager{Paths: paths.Paths{Root: root}, Devices: true, Scanner: inventory.Scanner{SysRoot: "/sys", DevRoot: "/dev"}}
	onDisk := &config.MachineConfig{Cluster: config.Cluster{ID: "e3217e6d4157725f"},
		Machine: config.Machine{Disks: config.Disks{Etcd: &config.DiskSpec{Selector: config.Selector{Serial: "cairn-etcd"}}}}}
	inRAM := &config.MachineConfig{Cluster: onDisk.Cluster, Machine: config.Machine{Disks: config.Disks{Etcd: &config.DiskSpec{Tmpfs: true}}}}
	ctx := context.Background()

	if err := m.CheckEtcdVolume(ctx, onDisk); err == nil || !strings.Contains(err.Error(), "nothing is mounted at "+target) {
		t.Errorf("a plain directory: CheckEtcdVolume() = %v, want refused", err)
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	if err := m.CheckEtcdVolume(ctx, onDisk); err == nil || !strings.Contains(err.Error(), "no partition of the machine's disks") {
		t.Errorf("a tmpfs where a disk was configured: CheckEtcdVolume() = %v, want refused", err)
	}
	if err := m.CheckEtcdVolume(ctx, inRAM); err != nil {
		t.Errorf("a tmpfs configured as one: CheckEtcdVolume() = %v, want nil", err)
	}
}
