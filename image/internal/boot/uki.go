package boot

import (
	"context"
	"os"
	"time"

	"github.com/cairn-os/cairn/api/uki"
)

// Stub is systemd's EFI stub (package systemd-boot-efi): it runs the kernel embedded in its .linux
// section with the .initrd and .cmdline sections.
const Stub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// SystemdBoot is systemd-boot itself, from the same package as Stub: the loader on the raw disk's ESP,
// which boots the UKIs in api/upgrade.EntriesDir and keeps their boot counters.
const SystemdBoot = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"

// UKIConfig are the inputs of BuildUKI.
type UKIConfig struct {
	Kernel, Initramfs, Cmdline, Version string
	Out                                 string
	Epoch                               int64
}

// BuildUKI makes the unified kernel image of a build with api/uki: systemd's stub with the kernel, the
// initramfs, the command line and uki.OSRelease, the very UKI a node installing from the ISO builds
// from the same files. Its PE timestamp and its mtime are the epoch, so two builds are the same bytes.
// The raw disk boots it and the upgrade bundle carries the same file.
func BuildUKI(ctx context.Context, c UKIConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ts := uint32(c.Epoch)
	in := uki.Inputs{Stub: Stub, Kernel: c.Kernel, Initramfs: c.Initramfs, Cmdline: c.Cmdline, Version: c.Version}
	if err := uki.BuildFiles(c.Out, in, uki.Options{Timestamp: &ts}); err != nil {
		return err
	}
	t := time.Unix(c.Epoch, 0)
	return os.Chtimes(c.Out, t, t)
}
