package kconfig

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
)

// BzImageRelease reads the kernel release from a bzImage's boot header: kernel_version at 0x20E, an
// offset from 0x200 of a version string such as "6.1.0-56-amd64 (debian-kernel@...) #1 SMP ...", whose
// first word it returns. kernel-check uses it to find the shipped kernel's config, `make size` to name
// the kernel.
func BzImageRelease(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	if len(b) < 0x210 || string(b[0x202:0x206]) != "HdrS" {
		return "", errors.New("not a bzImage")
	}
	off := int(binary.LittleEndian.Uint16(b[0x20E:])) + 0x200
	if off >= len(b) {
		return "", errors.New("kernel_version points outside the image")
	}
	s := b[off:min(len(b), off+256)]
	if i := strings.IndexByte(string(s), ' '); i > 0 {
		return string(s[:i]), nil
	}
	return "", errors.New("no version string")
}
