// Package bootmedium finds the Kubernetes payload on the medium the node booted from and mounts it
// read-only through dm-verity, checked against a root hash the root image records (one for each encoding
// of the payload the build made: compressed on the ISO, uncompressed on the raw disk).
//
// The payload travels beside the boot part rather than inside the initramfs, so the kernel unpacks only
// what the first seconds need (api/payload's Medium lists where it can be). Nothing here writes to a
// disk: a medium is opened read-only and mounted read-only.
//
// A candidate is first read in three places (its squashfs superblock, the dm-verity superblock and the
// top of the tree after it): one of another build, or a copy cut short, is refused there, by what it is.
// The one that matches is mounted through dm-verity, which checks each block as it is read for as long
// as the payload is mounted: nothing is hashed in advance, and a block changed on the medium later fails
// its read instead of reaching a process.
package bootmedium

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
	"github.com/cairn-os/cairn/machined/internal/verity"
)

// isoLabel is the volume ID of Cairn's ISO (image/internal/boot).
const isoLabel = "CAIRN"

// Mounter mounts and unmounts (sys.Mounter).
type Mounter interface {
	Mount(source, target, fstype string, flags uintptr, data string) error
	Unmount(target string, detach bool) error
}

// Verity opens an image through dm-verity (verity.Devices).
type Verity interface {
	OpenImage(ctx context.Context, dev, name string, v payload.Verity) (string, error)
	Close(ctx context.Context, name string) error
}

// MapperName is the payload's device-mapper device: /dev/mapper/cairn-payload.
const MapperName = "cairn-payload"

// Finder looks for the payload on the node's disks.
type Finder struct {
	// Disks lists the node's block devices (inventory.Scanner.Scan).
	Disks func(context.Context) ([]inventory.Disk, error)
	// Opener opens a device or a file read-only, to check it.
	Opener  inventory.Opener
	Mounter Mounter
	Verity  Verity
	// AttachLoop binds a file to a loop device, read-only: the ISO carries the payload as a file.
	AttachLoop func(file string) (device string, err error)
	// DetachLoop frees a loop device once nothing holds it (Release).
	DetachLoop func(device string) error
	// Unpacker unpacks an ISO's payload stream (api/payload.ISOStream) onto a volume; nil leaves such a
	// medium for later (ErrUnpackLater): the search in maintenance has no volume to unpack onto.
	Unpacker Unpacker
	// MediumDir is where an ISO medium is mounted (and stays mounted while the payload is in use).
	MediumDir string
	// LoadModules loads kernel modules before they are needed (isofs for an ISO medium: the node has no
	// modprobe for the kernel to ask); nil when they are built in or loaded already.
	LoadModules func(names ...string)
	// Slot names the slot whose payload partition is tried first (the slot the boot entry that started
	// belongs to, api/upgrade); nil or "": slot A, which the image ships in.
	Slot func() string
	// Wait is how long a search that finds nothing is repeated: a USB stick appears seconds after its
	// driver loads. Zero searches once.
	Wait time.Duration
	Log  *slog.Logger
}

// errNotFound marks a search that found no matching payload.
var errNotFound = errors.New("payload not found")

// retryEvery is the pause between two searches.
const retryEvery = 2 * time.Second

// candidate is one place the payload may be.
type candidate struct {
	path string // the block device
	slot string // the GPT partition name of a payload slot
	what string // what it is, for errors and logs
	iso  bool   // an ISO 9660 filesystem carrying payload.ISOFile; otherwise the image starts at byte 0
}

// candidates lists, in the order they are tried, every place on disks that may hold the payload: the
// raw disk's slot partitions, whole disks holding a squashfs image, and Cairn's ISO. Loop devices are
// skipped: they are the node's own (the root image; the payload once attached).
func candidates(disks []inventory.Disk, first string) []candidate {
	var slots, whole, isos []candidate
	for _, d := range disks {
		if strings.HasPrefix(d.Name, "loop") {
			continue
		}
		for _, p := range d.Partitions {
			if strings.HasPrefix(p.Label, payload.PartitionLabel("")) && p.Path != "" {
				slots = append(slots, candidate{path: p.Path, slot: p.Label, what: fmt.Sprintf("%s (partition %s)", p.Path, p.Label)})
			}
		}
		for _, s := range d.Signatures {
			switch {
			case s.Type == probe.TypeSquashfs:
				whole = append(whole, candidate{path: d.Path, what: d.Path + " (a disk holding a squashfs image)"})
			case s.Type == probe.TypeISO9660 && s.Label == isoLabel:
				isos = append(isos, candidate{path: d.Path, what: d.Path + " (the ISO 9660 medium " + isoLabel + ")", iso: true})
			}
		}
	}
	// The booted slot first, else slot A: it is what the image ships in. Two slots may hold the same
	// payload; the booted one is the one an upgrade will not overwrite.
	if first == "" {
		first = payload.SlotA
	}
	notFirst := func(c candidate) int {
		if c.slot == payload.PartitionLabel(first) {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(slots, func(a, b candidate) int { return cmp.Compare(notFirst(a), notFirst(b)) })
	return append(append(slots, whole...), isos...)
}

// Mounted is what a search mounted.
type Mounted struct {
	What string // the medium, as the log names it
	// Loop is the loop device holding the image file (the ISO's, or the stream unpacked), "" when the
	// image is a device of its own.
	Loop string
	// Unpacked is the file the ISO's stream was unpacked into, on a volume; "" for any other medium.
	Unpacked string
}

// Mount finds a payload that matches one of want and mounts it read-only, through dm-verity, on target. The
// error of a search that found nothing names every place tried and why each was not it.
func (f Finder) Mount(ctx context.Context, want payload.Records, target string) (Mounted, error) {
	deadline := time.Now().Add(f.Wait)
	for logged := false; ; logged = true {
		m, err := f.search(ctx, want, target)
		if !errors.Is(err, errNotFound) || !time.Now().Before(deadline) {
			return m, err
		}
		if !logged {
			f.Log.Info("payload: waiting for the boot medium", "error", err, "up to", time.Until(deadline).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return Mounted{}, ctx.Err()
		case <-time.After(retryEvery):
		}
	}
}

// Release undoes the mount of a payload unpacked onto a volume (m.Unpacked), so that the volume can be
// unmounted before a reboot or a wipe: it unmounts target (detached if something still holds it), closes
// the dm-verity device and frees the loop device. A payload on any other medium is left mounted: nothing
// of it is on a volume.
func (f Finder) Release(ctx context.Context, m Mounted, target string) error {
	if m.Unpacked == "" {
		return nil
	}
	var errs []error
	if err := f.Mounter.Unmount(target, false); err != nil {
		errs = append(errs, f.Mounter.Unmount(target, true))
	}
	errs = append(errs, f.Verity.Close(ctx, MapperName))
	if m.Loop != "" && f.DetachLoop != nil {
		errs = append(errs, f.DetachLoop(m.Loop))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("payload: release %s: %w", m.Unpacked, err)
	}
	return nil
}

// search looks once.
func (f Finder) search(ctx context.Context, want payload.Records, target string) (Mounted, error) {
	disks, err := f.Disks(ctx)
	if err != nil {
		return Mounted{}, fmt.Errorf("payload: list the disks: %w", err)
	}
	first := ""
	if f.Slot != nil {
		first = f.Slot()
	}
	cands := candidates(disks, first)
	if len(cands) == 0 {
		return Mounted{}, fmt.Errorf("%w: no boot medium carries one among %d disks: looked for a partition named %s, a disk holding a squashfs image, and an ISO 9660 medium labelled %s (vmlinux boots: attach payload.squashfs as a read-only disk)",
			errNotFound, len(disks), payload.PartitionLabel(payload.SlotA), isoLabel)
	}
	var tried []string
	for _, c := range cands {
		start := time.Now()
		m, got, why, err := f.try(ctx, c, want, target)
		if errors.Is(err, ErrUnpackLater) {
			f.Log.Info("payload found", "on", c.what, "dm-verity root hash", got.Verity.RootHash, "bytes", got.Size, "note", err)
			return m, err
		}
		if err != nil {
			return m, err
		}
		if why == "" {
			f.Log.Info("payload found", "on", c.what, "dm-verity root hash", got.Verity.RootHash, "bytes", got.Size, "opened in", time.Since(start).Round(time.Millisecond))
			return m, nil
		}
		tried = append(tried, c.what+": "+why)
	}
	return Mounted{}, fmt.Errorf("%w: no boot medium holds the payload this root image was built with (%s); tried %s",
		errNotFound, describe(want), strings.Join(tried, "; "))
}

// describe names the recorded payloads for an error: their root hashes and sizes.
func describe(want payload.Records) string {
	var s []string
	for _, r := range want {
		s = append(s, fmt.Sprintf("dm-verity root hash %s, %d bytes", r.Verity.RootHash, r.Size))
	}
	return strings.Join(s, ", or ")
}

// try checks one candidate and mounts it when it matches one of want, which it returns. why says why a
// candidate is not the payload; err is for what stops the search (the context, a matching payload that
// does not open or mount, or ErrUnpackLater).
func (f Finder) try(ctx context.Context, c candidate, want payload.Records, target string) (m Mounted, got payload.Record, why string, err error) {
	m.What = c.what
	dev := c.path
	// undo unmounts the ISO medium of a candidate that turned out not to be the payload.
	undo := func() {}
	if c.iso {
		file, stream, why, err := f.openISO(c.path)
		if err != nil || why != "" {
			return m, got, why, err
		}
		undo = func() { _ = f.Mounter.Unmount(f.MediumDir, false) }
		if stream {
			if got, why = f.streamRecord(file, want); why != "" {
				undo()
				return m, got, why, nil
			}
			if f.Unpacker == nil {
				undo()
				return m, got, "", ErrUnpackLater
			}
			// Once the payload is mounted the medium stays mounted too, as for the ISO's image file: an
			// install copies the kernel and the boot loader from it.
			if file, err = f.Unpacker.Unpack(ctx, file, got); err != nil {
				undo()
				return m, got, "", fmt.Errorf("payload: %s: %w", c.what, err)
			}
			m.Unpacked = file
		}
		if got, why = checkImage(f.Opener, file, want); why != "" {
			undo()
			return m, got, why, nil
		}
		if dev, err = f.AttachLoop(file); err != nil {
			undo()
			return m, got, "", fmt.Errorf("payload: attach %s to a loop device: %w", file, err)
		}
		m.Loop = dev
		undo = func() {
			if f.DetachLoop != nil {
				_ = f.DetachLoop(m.Loop)
			}
			_ = f.Mounter.Unmount(f.MediumDir, false)
		}
	} else if got, why = checkImage(f.Opener, dev, want); why != "" {
		return m, got, why, nil
	}
	mapped, err := f.Verity.OpenImage(ctx, dev, MapperName, got.Verity)
	if errors.Is(err, verity.ErrMismatch) {
		undo()
		return m, got, err.Error() + ": the copy is damaged, or was changed", nil
	}
	if err != nil {
		undo()
		return m, got, "", fmt.Errorf("payload: %s: %w", c.what, err)
	}
	if err := f.Mounter.Mount(mapped, target, "squashfs", unix.MS_RDONLY|unix.MS_NODEV, ""); err != nil {
		_ = f.Verity.Close(ctx, MapperName)
		undo()
		return m, got, "", fmt.Errorf("payload: mount %s (%s through dm-verity) on %s: %w", mapped, c.what, target, err)
	}
	return m, got, "", nil
}

// openISO mounts an ISO medium read-only on MediumDir and returns the payload file's path on it: the
// image (payload.ISOFile), or the stream (payload.ISOStream, stream true).
func (f Finder) openISO(dev string) (file string, stream bool, why string, err error) {
	if err := os.MkdirAll(f.MediumDir, 0o755); err != nil {
		return "", false, "", fmt.Errorf("payload: %w", err)
	}
	if f.LoadModules != nil {
		f.LoadModules("isofs")
	}
	if err := f.Mounter.Mount(dev, f.MediumDir, "iso9660", unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID, ""); err != nil {
		return "", false, "cannot be mounted: " + err.Error(), nil
	}
	for _, name := range []string{payload.ISOFile, payload.ISOStream} {
		file = filepath.Join(f.MediumDir, name)
		if _, err := os.Stat(file); err == nil {
			return file, name == payload.ISOStream, "", nil
		}
	}
	_ = f.Mounter.Unmount(f.MediumDir, false)
	return "", false, "has neither " + payload.ISOFile + " nor " + payload.ISOStream, nil
}

// checkImage reads the candidate through o in three places: the squashfs and dm-verity superblocks and the
// top of the tree, whose hash must be a recorded root (another build's payload has another), and the last
// byte of the image (a copy cut short has none). It returns the record the candidate may be, or why it is
// not the payload; dm-verity decides the rest as the blocks are read. The search checks each candidate with
// it, and DirUnpacker its earlier copy.
func checkImage(o inventory.Opener, path string, want payload.Records) (rec payload.Record, why string) {
	r, err := o.Open(path)
	if err != nil {
		return rec, "cannot be read: " + err.Error()
	}
	defer r.Close()
	if rec, why = Identify(r, want); why != "" {
		return rec, why
	}
	if _, err := r.ReadAt(make([]byte, 1), rec.Size-1); err != nil {
		return rec, fmt.Sprintf("is cut short: its last byte, at %d, cannot be read: %v", rec.Size-1, err)
	}
	return rec, ""
}

// Identify reads a payload image's dm-verity tree (three blocks) and returns which of want it is, or why
// it is none of them.
func Identify(r io.ReaderAt, want payload.Records) (rec payload.Record, why string) {
	got, err := payload.ReadVerity(r)
	if err != nil {
		return rec, "holds no Cairn payload: " + err.Error()
	}
	rec, ok := want.Find(got)
	if !ok {
		return rec, fmt.Sprintf("holds another build's payload (dm-verity root hash %s over %d bytes)", got.RootHash, got.DataSize)
	}
	return rec, ""
}

// ErrNoPayload is ReadRecords' error for an image built without Kubernetes.
var ErrNoPayload = errors.New("this image carries no Kubernetes payload")

// ReadRecords reads what the root image records for the payload (payload.SumFile).
func ReadRecords(file string) (payload.Records, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("payload: %w (%s is missing): it runs the maintenance API only", ErrNoPayload, file)
	}
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return payload.ParseRecords(string(b))
}
