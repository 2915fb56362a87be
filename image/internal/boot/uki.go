package boot

import (
	"context"
	"debug/pe"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
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
	// Out is the UKI; Work a scratch directory, removed afterwards.
	Out, Work string
	Epoch     int64
}

// OSRelease is the UKI's .osrel section. It has no ID= nor IMAGE_ID= on purpose: systemd-boot 252 sorts
// the UKIs that carry a sort key (IMAGE_ID, else ID) by their VERSION, while Cairn needs them sorted by
// file name, whose generation it controls (api/upgrade). Measured: with ID=cairn, systemd-boot booted
// the entry with the higher VERSION although its name sorted lower; without an ID it boots the highest
// generation, and a counted "+1" entry whose try is used up falls back to the other slot's entry.
func OSRelease(version string) string {
	return fmt.Sprintf("NAME=Cairn\nVERSION=%s\nVERSION_ID=%s\nPRETTY_NAME=\"Cairn %s\"\n", version, version, version)
}

// BuildUKI makes the unified kernel image of a build: systemd's stub with the kernel, the initramfs,
// the command line and OSRelease. The raw disk boots it and the upgrade bundle carries the same file.
func BuildUKI(ctx context.Context, c UKIConfig) error {
	if err := os.RemoveAll(c.Work); err != nil {
		return err
	}
	if err := os.MkdirAll(c.Work, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(c.Work)
	osrel := filepath.Join(c.Work, "os-release")
	cmdline := filepath.Join(c.Work, "cmdline")
	if err := os.WriteFile(osrel, []byte(OSRelease(c.Version)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(cmdline, []byte(c.Cmdline+"\x00"), 0o644); err != nil {
		return err
	}
	// objcopy writes beside the final name, so an interrupted build never leaves a truncated UKI there.
	tmp := c.Out + ".tmp"
	err := addSections(ctx, Stub, tmp, []ukiSection{
		{".osrel", osrel}, {".cmdline", cmdline}, {".linux", c.Kernel}, {".initrd", c.Initramfs},
	}, c.Epoch)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	t := time.Unix(c.Epoch, 0)
	if err := os.Chtimes(tmp, t, t); err != nil {
		return err
	}
	return os.Rename(tmp, c.Out)
}

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

// addSections writes the stub with sections added to out with objcopy, then sets its PE timestamp to
// epoch.
func addSections(ctx context.Context, stub, out string, sections []ukiSection, epoch int64) error {
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
