// Package install writes Cairn onto a disk from the live medium the node booted from (the ISO): the
// layout of cairn.raw — an EFI system partition with systemd-boot and slot A's boot entry, and the payload
// slots A and B — with slot A holding the very build that runs. The node then boots from the disk and
// upgrades it like any raw-disk node (package slots).
//
// Nothing the node can run without is built in advance: the boot entry (a unified kernel image) is made
// on the node from the kernel, initramfs, EFI stub and command line the ISO carries (api/upgrade's ISO
// paths), so the ISO does not carry a second copy of the kernel.
//
// The order makes an interrupted install harmless: the disk becomes bootable only with its last file,
// systemd-boot at the firmware's removable-media path, written after everything it boots (the payload
// read back, the loader's configuration and the boot entry in place). A power cut before that leaves a
// disk the firmware has nothing to start from and passes over, and the install can simply run again
// (with wipe: the disk is not blank any more).
package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/uki"
	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/gpt"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
	"github.com/cairn-os/cairn/machined/internal/slots"
)

var (
	payloadLabelA = payload.PartitionLabel(payload.SlotA)
	payloadLabelB = payload.PartitionLabel(payload.SlotB)
)

// Refusal is an install the node will not do as things are (the API's FailedPrecondition).
type Refusal struct{ Err error }

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// Precondition marks the error for the API.
func (*Refusal) Precondition() {}

// Mounter mounts and unmounts (sys.Mounter).
type Mounter interface {
	Mount(source, target, fstype string, flags uintptr, data string) error
	Unmount(target string, detach bool) error
}

// Mount flags, as data here so the package stays free of syscalls (linux values).
const (
	msNoSUID = 0x2
	msNoDev  = 0x4
	msNoExec = 0x8
)

// Source is the live medium Cairn installs from.
type Source struct {
	Dir     string      // where the ISO's filesystem is mounted
	Version string      // the running build's version, written into the boot entry
	Payload payload.Sum // the payload the running build records; the medium's copy is checked against it
	// PayloadFile is the payload image copied to slot A: the ISO's image file, or the image its stream
	// (payload.ISOStream) was unpacked into. "" is the ISO's payload.ISOFile.
	PayloadFile string
}

// check says whether Dir is Cairn's ISO with everything an install needs.
func (s Source) check() error {
	for _, f := range []string{upgrade.ISOKernel, upgrade.ISOInitramfs, upgrade.ISOStub, upgrade.ISOSystemdBoot, upgrade.ISOCmdline} {
		if _, err := os.Stat(filepath.Join(s.Dir, f)); err != nil {
			return &Refusal{fmt.Errorf("this node did not boot from Cairn's ISO (its medium has no %s): only a node booted from the ISO installs itself; a disk-booted node upgrades instead", f)}
		}
	}
	if _, err := os.Stat(s.payloadFile()); err != nil {
		return &Refusal{fmt.Errorf("this node did not boot from Cairn's ISO (its medium has no %s, and no payload was unpacked from its %s): only a node booted from the ISO installs itself; a disk-booted node upgrades instead", payload.ISOFile, payload.ISOStream)}
	}
	return nil
}

func (s Source) path(name string) string { return filepath.Join(s.Dir, filepath.FromSlash(name)) }

func (s Source) payloadFile() string {
	if s.PayloadFile != "" {
		return s.PayloadFile
	}
	return s.path(payload.ISOFile)
}

// Request is what to install onto.
type Request struct {
	Disk config.Selector
	Wipe bool
}

// Installer writes the installed layout onto a disk.
type Installer struct {
	// Disks lists the node's block devices (inventory.Scanner.Scan).
	Disks func(context.Context) ([]inventory.Disk, error)
	// Partitions finds a partition's device once the table is written (apply.KernelPartitions).
	Partitions apply.PartitionDevices
	// Devices opens the disk for writing; nil means apply.OSDevices (exclusive: never under a mount).
	Devices apply.DeviceOpener
	// Runner runs mkfs.fat.
	Runner  apply.Runner
	Mounter Mounter
	// Mounts returns /proc/self/mounts.
	Mounts func() ([]byte, error)
	// LoadModules loads the ESP's filesystem modules (nil: built in).
	LoadModules func(names ...string)
	// Work is a scratch directory (in RAM): the boot entry is built there and the ESP mounted below it.
	Work string
	// NewGUID makes the disk's and partitions' GUIDs; nil means gpt.NewGUID.
	NewGUID func() (gpt.GUID, error)
	Log     *slog.Logger
}

// Install writes Cairn from src onto the disk req selects and returns that disk. tell is told each step.
func (i *Installer) Install(ctx context.Context, src Source, req Request, tell func(string)) (inventory.Disk, error) {
	// Each step also goes to machined's log, which outlives the client's stream.
	progress := func(msg string) {
		if i.Log != nil {
			i.Log.Info("install: " + msg)
		}
		tell(msg)
	}
	if err := src.check(); err != nil {
		return inventory.Disk{}, err
	}
	disks, err := i.Disks(ctx)
	if err != nil {
		return inventory.Disk{}, err
	}
	mounts, err := i.Mounts()
	if err != nil {
		return inventory.Disk{}, err
	}
	d, erase, err := Choose(disks, req.Disk, req.Wipe, string(mounts))
	if err != nil {
		return d, &Refusal{err}
	}
	progress(fmt.Sprintf("installing Cairn %s onto %s", src.Version, d.Describe()))
	if err := os.MkdirAll(i.Work, 0o700); err != nil {
		return d, err
	}
	entry := filepath.Join(i.Work, "entry.efi")
	defer os.Remove(entry)
	progress("building the boot entry: systemd's EFI stub with this node's kernel, initramfs and command line")
	if err := i.buildEntry(src, entry); err != nil {
		return d, fmt.Errorf("build the boot entry: %w", err)
	}
	fi, err := os.Stat(entry)
	if err != nil {
		return d, err
	}
	guids := i.NewGUID
	if guids == nil {
		guids = gpt.NewGUID
	}
	table, err := Layout(d, upgrade.ESPSize(fi.Size()), guids)
	if err != nil {
		return d, &Refusal{err}
	}
	if erase {
		progress(fmt.Sprintf("erasing %s: it held %s", d.Path, plan.DescribeContents(d)))
		if err := (&apply.Applier{Devices: i.Devices}).Wipe(d); err != nil {
			return d, err
		}
	}
	progress(fmt.Sprintf("partitioning %s: %s, %s and %s", d.Path, upgrade.ESPLabel, payloadLabelA, payloadLabelB))
	if err := i.writeTable(d, table); err != nil {
		return d, err
	}
	espDev, _, err := i.Partitions.Device(ctx, d, 1)
	if err != nil {
		return d, err
	}
	slotDev, _, err := i.Partitions.Device(ctx, d, 2)
	if err != nil {
		return d, err
	}
	progress(fmt.Sprintf("writing the payload (%d MiB) to slot A (%s)", src.Payload.Size>>20, slotDev))
	if err := i.writePayload(ctx, src, slotDev, progress); err != nil {
		return d, fmt.Errorf("slot A's payload partition %s: %w", slotDev, err)
	}
	progress(fmt.Sprintf("making the EFI system partition %s: systemd-boot and slot A's boot entry", espDev))
	if err := i.writeESP(ctx, src, espDev, entry); err != nil {
		return d, fmt.Errorf("the EFI system partition %s: %w", espDev, err)
	}
	return d, nil
}

// buildEntry makes the unified kernel image of the running build from the medium's parts.
func (i *Installer) buildEntry(src Source, out string) error {
	cmdline, err := os.ReadFile(src.path(upgrade.ISOCmdline))
	if err != nil {
		return err
	}
	return uki.BuildFiles(out, uki.Inputs{Stub: src.path(upgrade.ISOStub), Kernel: src.path(upgrade.ISOKernel),
		Initramfs: src.path(upgrade.ISOInitramfs), Cmdline: string(cmdline), Version: src.Version}, uki.Options{})
}

func (i *Installer) devices() apply.DeviceOpener {
	if i.Devices == nil {
		return apply.OSDevices{}
	}
	return i.Devices
}

func (i *Installer) writeTable(d inventory.Disk, t gpt.Table) error {
	dev, err := i.devices().OpenWrite(d.Path)
	if err != nil {
		return fmt.Errorf("open %s to partition it: %w", d.Path, err)
	}
	if err := t.Write(dev); err != nil {
		dev.Close()
		return fmt.Errorf("partition %s: %w", d.Path, err)
	}
	if err := dev.Sync(); err != nil {
		dev.Close()
		return fmt.Errorf("partition %s: sync: %w", d.Path, err)
	}
	return dev.Close()
}

// writePayload copies the medium's payload to the slot's partition; WriteDevice reads it back and checks
// it against the SHA-256 the running build records, so a damaged medium never makes a bootable disk.
func (i *Installer) writePayload(ctx context.Context, src Source, dev string, progress func(string)) error {
	f, err := os.Open(src.payloadFile())
	if err != nil {
		return err
	}
	defer f.Close()
	return slots.WriteDevice(ctx, dev, io.LimitReader(f, src.Payload.Size), src.Payload, progress)
}

// espFiles are the ESP's files in the order written: systemd-boot last, so the firmware finds something to
// start only once everything it boots is in place (a systemd-boot with no entry would stop at its error).
func espFiles(src Source, entry string) []struct{ dst, src string } {
	return []struct{ dst, src string }{
		{upgrade.LoaderConf, ""}, // upgrade.LoaderConfText
		{path.Join(upgrade.EntriesDir, upgrade.FirstEntry.FileName()), entry},
		{upgrade.LoaderPath, src.path(upgrade.ISOSystemdBoot)},
	}
}

// espModules are what making and mounting the ESP takes.
var espModules = []string{"vfat", "nls_cp437", "nls_iso8859_1"}

func (i *Installer) writeESP(ctx context.Context, src Source, dev, entry string) error {
	// FAT32 as on cairn.raw; the volume label is informational, machined finds the ESP by its partition name.
	if _, err := i.Runner.Run(ctx, "mkfs.fat", "-F", "32", "-n", "EFI", dev); err != nil {
		return err
	}
	if i.LoadModules != nil {
		i.LoadModules(espModules...)
	}
	dir := filepath.Join(i.Work, "esp")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := i.Mounter.Mount(dev, dir, "vfat", msNoSUID|msNoDev|msNoExec, "umask=0077,codepage=437,iocharset=iso8859-1"); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	err := func() error {
		for _, f := range espFiles(src, entry) {
			if err := copyIn(dir, f.dst, f.src); err != nil {
				return err
			}
		}
		return nil
	}()
	if uerr := i.Mounter.Unmount(dir, false); uerr != nil && err == nil {
		err = fmt.Errorf("unmount: %w", uerr)
	}
	return err
}

// copyIn writes src (or, for "", the loader's configuration) to root/dst and syncs it and its directory.
func copyIn(root, dst, src string) error {
	target := filepath.Join(root, filepath.FromSlash(dst))
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return err
	}
	out, err := os.Create(target)
	if err != nil {
		return err
	}
	if src == "" {
		_, err = io.WriteString(out, upgrade.LoaderConfText)
	} else {
		err = copyFrom(out, src)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	d, err := os.Open(filepath.Dir(target))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", path.Dir(dst), err)
	}
	return nil
}

func copyFrom(w io.Writer, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
