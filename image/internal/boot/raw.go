package boot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/upgrade"
)

// RawConfig are the inputs of Raw.
type RawConfig struct {
	// UKI is the unified kernel image to boot (BuildUKI); "" builds one from Kernel, Initramfs, Cmdline
	// and Version.
	UKI                                 string
	Kernel, Initramfs, Cmdline, Version string
	// Payload is the payload image, written to slot A's partition; "" for none.
	Payload   string
	Out, Work string
	Epoch     int64
	Size      int64 // whole disk, bytes
}

// mib is a mebibyte, for the sizes of the disk and its partitions.
const mib = 1 << 20

// BootPartitionName is the GPT name of the ESP; machined recognises the disk it booted from by it and
// never offers that disk for a volume. The ISO's volume ID, "CAIRN", plays the same part.
const BootPartitionName = upgrade.ESPLabel

// espFile is a file on the ESP and where its content comes from.
type espFile struct {
	path, src string
}

// Raw builds a sparse GPT disk laid out as api/upgrade says (ESPStart, ESPSize, SlotSize), the layout
// a node's install from the ISO writes too: partition 1 is the ESP, with systemd-boot as \EFI\BOOT\BOOTX64.EFI
// (the removable-media path every UEFI firmware boots without NVRAM entries), its loader.conf, and the
// UKI as slot A's first entry in EFI/Linux (api/upgrade); partitions 2 and 3 are the payload slots A
// and B (api/payload.PartitionLabel), A holding the payload image from its first byte and B empty
// until an upgrade writes it. Cairn's volumes go on other disks: machined never offers the boot disk
// for one.
func Raw(ctx context.Context, c RawConfig) error {
	if err := os.RemoveAll(c.Work); err != nil {
		return err
	}
	if err := os.MkdirAll(c.Work, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(c.Work)
	uki := c.UKI
	if uki == "" {
		uki = filepath.Join(c.Work, "uki.efi")
		err := BuildUKI(ctx, UKIConfig{
			Kernel: c.Kernel, Initramfs: c.Initramfs, Cmdline: c.Cmdline, Version: c.Version, Out: uki, Epoch: c.Epoch,
		})
		if err != nil {
			return err
		}
	}
	fi, err := os.Stat(uki)
	if err != nil {
		return err
	}
	espSize := upgrade.ESPSize(fi.Size())
	if upgrade.ESPStart+espSize+mib > c.Size {
		return fmt.Errorf("disk size %d is too small for a %d-byte ESP", c.Size, espSize)
	}
	loaderConf := filepath.Join(c.Work, "loader.conf")
	if err := os.WriteFile(loaderConf, []byte(upgrade.LoaderConfText), 0o644); err != nil {
		return err
	}
	esp := filepath.Join(c.Work, "esp.img")
	files := []espFile{
		{upgrade.LoaderPath, SystemdBoot},
		{upgrade.LoaderConf, loaderConf},
		{path.Join(upgrade.EntriesDir, upgrade.FirstEntry.FileName()), uki},
	}
	if err := makeESP(ctx, esp, c.Work, files, espSize, c.Epoch); err != nil {
		return err
	}
	if err := os.Remove(c.Out); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := makeSparse(c.Out, c.Size); err != nil {
		return err
	}
	seed := fmt.Sprintf("cairn %s %d", c.Version, c.Epoch)
	sgdisk := []string{"--clear",
		"--disk-guid=" + guid(seed+" disk"),
		fmt.Sprintf("--new=1:%d:%d", upgrade.ESPStart/512, (upgrade.ESPStart+espSize)/512-1),
		"--typecode=1:ef00", "--change-name=1:" + BootPartitionName,
		"--partition-guid=1:" + guid(seed+" esp"),
	}
	slotStart := upgrade.ESPStart + espSize
	if c.Payload != "" {
		pi, err := os.Stat(c.Payload)
		if err != nil {
			return err
		}
		if pi.Size() > upgrade.SlotSize {
			return fmt.Errorf("payload %s is %d bytes, more than a slot's %d", c.Payload, pi.Size(), int64(upgrade.SlotSize))
		}
		if slotStart+2*upgrade.SlotSize+mib > c.Size {
			return fmt.Errorf("disk size %d is too small for the ESP and two %d-byte payload slots", c.Size, int64(upgrade.SlotSize))
		}
		for i, slot := range []string{payload.SlotA, payload.SlotB} {
			n, start := i+2, slotStart+int64(i)*upgrade.SlotSize
			sgdisk = append(sgdisk,
				fmt.Sprintf("--new=%d:%d:%d", n, start/512, (start+upgrade.SlotSize)/512-1),
				fmt.Sprintf("--typecode=%d:8300", n), fmt.Sprintf("--change-name=%d:%s", n, payload.PartitionLabel(slot)),
				fmt.Sprintf("--partition-guid=%d:%s", n, guid(seed+" payload "+slot)))
		}
	}
	cmd := exec.CommandContext(ctx, "sgdisk", append(sgdisk, c.Out)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sgdisk %s: %w: %s", c.Out, err, out)
	}
	if err := copySparse(c.Out, esp, upgrade.ESPStart); err != nil {
		return err
	}
	if c.Payload != "" {
		return copySparse(c.Out, c.Payload, slotStart)
	}
	return nil
}

// makeESP formats a FAT32 image with mtools (no root, no loop device) and copies the files in, each
// directory made and each file copied in the order given. The volume serial is fixed, mtools stamps
// directory entries with SOURCE_DATE_EPOCH, and each file is copied from work with its time set to the
// epoch (mcopy -m keeps a file's time; the originals, like systemd-boot's, are not touched).
func makeESP(ctx context.Context, img, work string, files []espFile, size, epoch int64) error {
	if err := makeSparse(img, size); err != nil {
		return err
	}
	t := time.Unix(epoch, 0)
	cmds := [][]string{
		{"mformat", "-i", img, "-F", "-v", "EFI", "-N", fmt.Sprintf("%08x", uint32(epoch)), "-T", strconv.FormatInt(size/512, 10), "-h", "64", "-s", "32", "::"},
	}
	made := map[string]bool{}
	for i, f := range files {
		var dirs []string
		for d := path.Dir(f.path); d != "." && !made[d]; d = path.Dir(d) {
			made[d] = true
			dirs = append([]string{"::/" + d}, dirs...)
		}
		if len(dirs) > 0 {
			cmds = append(cmds, append([]string{"mmd", "-i", img}, dirs...))
		}
		src := filepath.Join(work, fmt.Sprintf("esp-%d", i))
		if err := copyFile(src, f.src); err != nil {
			return err
		}
		if err := os.Chtimes(src, t, t); err != nil {
			return err
		}
		cmds = append(cmds, []string{"mcopy", "-i", img, "-m", src, "::/" + f.path})
	}
	env := append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(epoch, 10), "MTOOLS_SKIP_CHECK=1")
	for _, a := range cmds {
		cmd := exec.CommandContext(ctx, a[0], a[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", a[0], img, err, out)
		}
	}
	return nil
}

// guid derives a stable RFC 4122 version-4-shaped GUID from seed, so the disk's identifiers change
// only when its inputs do.
func guid(seed string) string {
	h := sha256.Sum256([]byte(seed))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func makeSparse(p string, size int64) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// copySparse writes src into dst at off, skipping all-zero blocks so the disk stays sparse.
func copySparse(dst, src string, off int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	buf := make([]byte, 64*1024)
	zero := make([]byte, len(buf))
	for pos := int64(0); ; {
		n, err := io.ReadFull(in, buf)
		if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
			if _, werr := out.WriteAt(buf[:n], off+pos); werr != nil {
				out.Close()
				return fmt.Errorf("write %s: %w", dst, werr)
			}
		}
		pos += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			out.Close()
			return fmt.Errorf("read %s: %w", src, err)
		}
	}
	return out.Close()
}
