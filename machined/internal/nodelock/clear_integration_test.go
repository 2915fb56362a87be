//go:build integration

package nodelock

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// After a reset wiped and unmounted STATE, the lock's directory is the bare mount point in the read-only
// root image: releasing the lock there must only forget it (unlink fails with EROFS even for a file that
// is not there, which stopped resets before).
func TestClearOnABareReadOnlyMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	state := t.TempDir()
	l, _ := Open(state, nil)
	if err := l.Take(OwnerInit, []byte("c"), nil); err != nil {
		t.Fatal(err)
	}
	bare := t.TempDir() // what is left once STATE is unmounted: an empty directory, read-only
	for _, args := range [][]string{{"--bind", bare, bare}, {"-o", "remount,bind,ro", bare}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %v: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("umount", bare).Run() })
	l.dir = bare // STATE was unmounted from under the lock
	if err := l.Clear(); err != nil {
		t.Fatalf("Clear on a bare read-only mount point = %v", err)
	}
	if l.Record() != nil {
		t.Error("the lock is still held after Clear")
	}
	if _, err := os.Stat(filepath.Join(state, LockFile)); err != nil {
		t.Errorf("the lock file of the (wiped) STATE was touched: %v", err)
	}
}
