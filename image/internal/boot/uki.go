package boot

import (
	"context"
	"debug/pe"
	"fmt"
	"os"
	"os/exec"
)

// Stub is systemd's EFI stub (package systemd-boot-efi): it runs the kernel embedded in its .linux
// section with the .initrd and .cmdline sections.
const Stub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// ukiSection is one section objcopy adds to the stub.
type ukiSection struct {
	name, file string
}

// ukiLayout returns each section's virtual address: after the stub's own sections, in order, each
// aligned to 64 KiB so no two overlap however large the kernel and initramfs are.
func ukiLayout(stubEnd uint64, sizes []int64) []uint64 {
	const align = 0x10000
	next := (stubEnd + align - 1) &^ (align - 1)
	vmas := make([]uint64, len(sizes))
	for i, s := range sizes {
		vmas[i] = next
		next = (next + uint64(s) + align - 1) &^ (align - 1)
	}
	return vmas
}

// UKI writes a unified kernel image to out with objcopy, then sets its PE timestamp to epoch.
func UKI(ctx context.Context, stub, out string, sections []ukiSection, epoch int64) error {
	f, err := pe.Open(stub)
	if err != nil {
		return fmt.Errorf("EFI stub %s: %w", stub, err)
	}
	var end uint64
	for _, s := range f.Sections {
		if e := uint64(s.VirtualAddress) + uint64(s.VirtualSize); e > end {
			end = e
		}
	}
	f.Close()
	sizes := make([]int64, len(sections))
	for i, s := range sections {
		fi, err := os.Stat(s.file)
		if err != nil {
			return fmt.Errorf("UKI section %s: %w", s.name, err)
		}
		sizes[i] = fi.Size()
	}
	args := []string{}
	for i, vma := range ukiLayout(end, sizes) {
		s := sections[i]
		args = append(args,
			"--add-section", s.name+"="+s.file,
			"--change-section-vma", fmt.Sprintf("%s=%#x", s.name, vma),
			"--set-section-flags", s.name+"=data,readonly")
	}
	args = append(args, stub, out)
	if b, err := exec.CommandContext(ctx, "objcopy", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("objcopy %s: %w: %s", out, err, b)
	}
	return setPETimestamp(out, epoch)
}
