//go:build integration

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMountAsKubeletDoes builds cairn-mount, calls it through mount/umount
// symlinks the way kubelet does, and checks the kernel's view in
// /proc/self/mountinfo. Needs root.
func TestMountAsKubeletDoes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "cairn-mount")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, n := range []string{"mount", "umount"} {
		if err := os.Symlink(bin, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(dir, name), args...).CombinedOutput()
		return string(out), err
	}
	tmpfs := filepath.Join(dir, "tmpfs")
	bind := filepath.Join(dir, "bind")
	for _, d := range []string{tmpfs, bind} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = syscall.Unmount(bind, syscall.MNT_DETACH)
		_ = syscall.Unmount(tmpfs, syscall.MNT_DETACH)
	})

	if out, err := run("mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", tmpfs); err != nil {
		t.Fatalf("mount tmpfs: %v\n%s", err, out)
	}
	if line := mountinfo(t, tmpfs); !strings.Contains(line, " - tmpfs tmpfs ") || !strings.Contains(line, "size=1024k") {
		t.Errorf("mountinfo for %s = %q, want a 1m tmpfs", tmpfs, line)
	}
	if out, err := run("mount", "-o", "bind,ro", tmpfs, bind); err != nil {
		t.Fatalf("mount bind ro: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(bind, "f"), nil, 0o644); err == nil {
		t.Errorf("write to read-only bind mount %s succeeded", bind)
	}
	if out, err := run("umount", bind); err != nil {
		t.Fatalf("umount %s: %v\n%s", bind, err, out)
	}
	// kubelet learns from this message that umount is safe on non-mounts.
	out, err := run("umount", bind)
	if err == nil || !strings.Contains(out, "not mounted") {
		t.Errorf("umount of a non-mount = %v, %q, want failure saying 'not mounted'", err, out)
	}
	if out, err := run("umount", tmpfs); err != nil {
		t.Fatalf("umount %s: %v\n%s", tmpfs, err, out)
	}
}

func mountinfo(t *testing.T, target string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == target {
			return line
		}
	}
	return ""
}
