//go:build integration

package sys

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestIsMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tmpfs")
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, sub} {
		if ok, err := IsMountPoint(p); err != nil || ok {
			t.Errorf("IsMountPoint(%s) before the mount = %v, %v, want false", p, ok, err)
		}
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(sub, unix.MNT_DETACH)
	if ok, err := IsMountPoint(sub); err != nil || !ok {
		t.Errorf("IsMountPoint(a tmpfs) = %v, %v, want true", ok, err)
	}
	if ok, err := IsMountPoint("/"); err != nil || !ok {
		t.Errorf("IsMountPoint(/) = %v, %v, want true", ok, err)
	}
}
