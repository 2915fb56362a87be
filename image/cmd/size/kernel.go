package main

import (
	"strings"

	kconfig "github.com/cairn-os/cairn/kernel-config"
)

// kernelNote says whose kernel the image ships, from the release its bzImage names: make kernel's
// builds carry the "-cairn" local version (hack/kernel/build.sh), anything else came from the build
// host's Debian package.
func kernelNote(vmlinuz string) string {
	release, err := kconfig.BzImageRelease(vmlinuz)
	switch {
	case err != nil:
		return "release unknown"
	case strings.HasSuffix(release, "-cairn"):
		return "make kernel's " + release + ", its drivers built in"
	default:
		return "Debian's " + release + ", as shipped"
	}
}
