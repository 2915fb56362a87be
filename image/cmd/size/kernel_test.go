package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// fakeBzImage is a setup header naming version at offset 0x3000, as a bzImage does.
func fakeBzImage(version string) []byte {
	b := make([]byte, 0x3100)
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x20e:], 0x3000-0x200)
	copy(b[0x3000:], version+"\x00garbage")
	return b
}

func TestKernelNote(t *testing.T) {
	for _, tc := range []struct {
		name  string
		image []byte
		want  string
	}{
		{"debian", fakeBzImage("6.1.0-56-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-2"), "Debian's 6.1.0-56-amd64, as shipped"},
		{"make kernel", fakeBzImage("6.1.192-cairn (root@vm) #2 SMP PREEMPT_DYNAMIC"), "make kernel's 6.1.192-cairn, its drivers built in"},
		{"not a bzImage", bytes.Repeat([]byte{0x7f}, 0x400), "release unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "vmlinuz")
			if err := os.WriteFile(p, tc.image, 0o644); err != nil {
				t.Fatal(err)
			}
			if got := kernelNote(p); got != tc.want {
				t.Errorf("kernelNote() = %q, want %q", got, tc.want)
			}
		})
	}
}
