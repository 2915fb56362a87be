//go:build integration

package modload

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// An uncompressed module goes to finit_module(2), the kernel reading the file: what the kernel refuses
// here (a file that is no module) is finit_module's answer, not init_module's after a read into memory.
func TestLoadUsesFinit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading a kernel module needs root")
	}
	p := filepath.Join(t.TempDir(), "not_a_module.ko")
	if err := os.WriteFile(p, []byte("not an ELF object"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Load(p, "")
	var se *os.SyscallError
	if !errors.As(err, &se) || se.Syscall != "finit_module" {
		t.Fatalf("Load(%s) = %v, want finit_module's refusal", p, err)
	}
	if err := Load(filepath.Join(t.TempDir(), "missing.ko"), ""); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(a missing file) = %v, want it not to exist", err)
	}
}
