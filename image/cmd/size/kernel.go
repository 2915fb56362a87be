package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"strings"
)

// kernelNote says whose kernel the image ships, from the release its bzImage names: make kernel's
// builds carry the "-cairn" local version (hack/kernel/build.sh), anything else came from the build
// host's Debian package.
func kernelNote(vmlinuz string) string {
	f, err := os.Open(vmlinuz)
	if err != nil {
		return ""
	}
	defer f.Close()
	release := bzImageRelease(f)
	switch {
	case release == "":
		return "release unknown"
	case strings.HasSuffix(release, "-cairn"):
		return "make kernel's " + release + ", its drivers built in"
	default:
		return "Debian's " + release + ", as shipped"
	}
}

// bzImageRelease reads the kernel release from a bzImage's setup header (the boot protocol's
// kernel_version field at 0x20E: the offset, less 0x200, of a version string such as
// "6.1.0-56-amd64 (debian-kernel@...) #1 SMP ..."); "" when r is not a bzImage.
func bzImageRelease(r io.ReaderAt) string {
	hdr := make([]byte, 0x210)
	if _, err := r.ReadAt(hdr, 0); err != nil || string(hdr[0x202:0x206]) != "HdrS" {
		return ""
	}
	off := int64(binary.LittleEndian.Uint16(hdr[0x20e:])) + 0x200
	s := make([]byte, 128)
	n, _ := r.ReadAt(s, off)
	s = s[:n]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	release, _, _ := strings.Cut(string(s), " ")
	return release
}
