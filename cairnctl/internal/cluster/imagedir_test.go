package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

func touch(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultImageDir(t *testing.T) {
	repo := t.TempDir()
	touch(t, filepath.Join(repo, "_out", "vmlinux"))
	touch(t, filepath.Join(repo, "_out", "cairnctl"))
	touch(t, filepath.Join(repo, "bin", "cairnctl"))
	elsewhere := t.TempDir()
	touch(t, filepath.Join(elsewhere, "cairnctl"))
	tests := []struct {
		exe, want string
	}{
		{filepath.Join(repo, "_out", "cairnctl"), filepath.Join(repo, "_out")}, // make build's binary
		{filepath.Join(repo, "bin", "cairnctl"), filepath.Join(repo, "_out")},  // another binary in the repository
		{filepath.Join(elsewhere, "cairnctl"), "_out"},                         // go run, or an installed copy
		{"", "_out"},
	}
	for _, tt := range tests {
		if got := DefaultImageDir(tt.exe); got != tt.want {
			t.Errorf("DefaultImageDir(%q) = %q, want %q", tt.exe, got, tt.want)
		}
	}
}

func TestFindArtifacts(t *testing.T) {
	dir := t.TempDir()
	touch(t, filepath.Join(dir, "vmlinux"))
	touch(t, filepath.Join(dir, "initramfs.cpio.zst"))
	a, err := FindArtifacts(dir, qemu.ModeVmlinux)
	if err != nil {
		t.Fatalf("FindArtifacts(vmlinux) = %v", err)
	}
	if a.Kernel != filepath.Join(dir, "vmlinux") || !filepath.IsAbs(a.Initramfs) {
		t.Errorf("FindArtifacts(vmlinux) = %+v, want absolute paths in %s", a, dir)
	}
	_, err = FindArtifacts(dir, qemu.ModeISO)
	if err == nil || !strings.Contains(err.Error(), "cairn.iso is missing") || !strings.Contains(err.Error(), "make image") {
		t.Errorf("FindArtifacts(iso) = %v, want an error naming cairn.iso and `make image`", err)
	}
	if _, err := FindArtifacts(dir, "pxe"); err == nil {
		t.Errorf("FindArtifacts(pxe) = nil error, want an unknown mode")
	}
}

func TestDefaultRootWithoutHome(t *testing.T) {
	t.Setenv("HOME", "")
	r, err := DefaultRoot()
	// Without $HOME the user database answers (root's home here); either way the path is absolute.
	if err != nil {
		if !strings.Contains(err.Error(), "--state-dir") {
			t.Errorf("DefaultRoot() without HOME = %v, want a hint at --state-dir", err)
		}
		return
	}
	if !filepath.IsAbs(r) || !strings.HasSuffix(r, filepath.Join(".cairn", "clusters")) {
		t.Errorf("DefaultRoot() without HOME = %q, want an absolute .../.cairn/clusters", r)
	}
}
