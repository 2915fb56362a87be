// Package boot makes the bootable containers around the kernel and initramfs: a hybrid BIOS/UEFI ISO
// (GRUB through grub-mkrescue), a unified kernel image (systemd's EFI stub), and a sparse GPT disk whose
// EFI system partition boots that UKI through systemd-boot. Each is byte-identical across builds of the same inputs: every
// tool gets SOURCE_DATE_EPOCH, and GUIDs and serial numbers are derived from the inputs.
package boot

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/upgrade"
)

// ISOConfig are the inputs of ISO.
type ISOConfig struct {
	Kernel, Initramfs, Cmdline string
	// Payload is the payload image, carried as api/payload.ISOFile at the ISO's root; "" for none.
	Payload string
	// PayloadStream is the payload as one stream, carried as api/payload.ISOStream instead; "" for none.
	PayloadStream string
	Out, Work     string
	Epoch         int64
}

// grubCfg boots at once (timeout 0) and uses the serial line as well as the screen, so the same ISO
// works in QEMU tests and on a real machine.
func grubCfg(cmdline string) string {
	return `serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=0
menuentry "Cairn" {
	linux /` + upgrade.ISOKernel + ` ` + cmdline + `
	initrd /` + upgrade.ISOInitramfs + `
}
`
}

// isoGrubModules are what grubCfg needs on either platform: the kernel loader and the menu, the serial
// terminal, the video drivers (the EFI kernel loader wants a mode to hand over), and the ISO and
// partition formats to find its files. Every partition map GRUB has is listed: grub-mkrescue's early
// config loads each one by name and prints an error on the console for every one that is missing.
const isoGrubModules = "linux normal configfile echo test search serial terminal all_video iso9660 fat " +
	"part_acorn part_amiga part_apple part_bsd part_dfly part_dvh part_gpt part_msdos part_plan part_sun part_sunpc"

// xorrisoEFI is the xorriso grub-mkrescue runs: it remakes GRUB's EFI image at the size of what it
// holds (2.6 MiB of the ISO were a FAT image's free space), then runs xorriso.
//
//go:embed xorriso-efi.sh
var xorrisoEFI []byte

// ISO builds a hybrid ISO with grub-mkrescue (GRUB for BIOS El Torito and for UEFI from an embedded
// FAT image). xorriso and mtools read SOURCE_DATE_EPOCH; file dates are forced to it as well.
func ISO(ctx context.Context, c ISOConfig) error {
	if err := os.RemoveAll(c.Work); err != nil {
		return err
	}
	defer os.RemoveAll(c.Work)
	root := filepath.Join(c.Work, "iso")
	// Besides what GRUB boots, the ISO carries what a node booted from it needs to install itself onto
	// a disk (api/upgrade.ISOStub and the rest): it has no objcopy nor systemd-boot of its own.
	files := map[string]string{
		upgrade.ISOKernel: c.Kernel, upgrade.ISOInitramfs: c.Initramfs,
		upgrade.ISOSystemdBoot: SystemdBoot, upgrade.ISOStub: Stub,
	}
	if c.Payload != "" {
		files[payload.ISOFile] = c.Payload
	}
	if c.PayloadStream != "" {
		files[payload.ISOStream] = c.PayloadStream
	}
	for dst, src := range files {
		if err := copyFile(filepath.Join(root, dst), src); err != nil {
			return err
		}
	}
	for dst, text := range map[string]string{"boot/grub/grub.cfg": grubCfg(c.Cmdline), upgrade.ISOCmdline: c.Cmdline} {
		if err := writeFile(filepath.Join(root, dst), []byte(text)); err != nil {
			return err
		}
	}
	if err := touchTree(root, c.Epoch); err != nil {
		return err
	}
	xorriso := filepath.Join(c.Work, "xorriso-efi.sh")
	if err := os.WriteFile(xorriso, xorrisoEFI, 0o755); err != nil {
		return err
	}
	date := time.Unix(c.Epoch, 0).UTC().Format("2006010215040500")
	// Only the GRUB modules this grub.cfg uses (grub-mkrescue's default installs every module of both
	// platforms, every translation and a 2 MiB font: 16 MiB of the ISO, measured), compressed.
	// xorriso-efi.sh shrinks GRUB's EFI image to what it holds before xorriso runs.
	cmd := exec.CommandContext(ctx, "grub-mkrescue", "--xorriso="+xorriso, "-o", c.Out,
		"--locales=", "--fonts=", "--themes=", "--compress=xz", "--install-modules="+isoGrubModules,
		root, "--",
		"-volid", "CAIRN",
		"-volume_date", "all_file_dates", date,
		"-volume_date", "uuid", date)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(c.Epoch, 10))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("grub-mkrescue %s: %w: %s", c.Out, err, out)
	}
	if _, err := setFATSerials(c.Out, uint32(c.Epoch)); err != nil {
		return fmt.Errorf("%s: %w", c.Out, err)
	}
	return nil
}

func copyFile(dst, src string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return writeFile(dst, data)
}

// writeFile writes a file, making its directory first.
func writeFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// touchTree sets every file and directory under root to the epoch.
func touchTree(root string, epoch int64) error {
	t := time.Unix(epoch, 0)
	return filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, t, t)
	})
}
