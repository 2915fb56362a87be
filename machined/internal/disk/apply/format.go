package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/gpt"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
)

// WritableDevice is a block device opened for writing.
type WritableDevice interface {
	io.WriterAt
	io.Closer
	Sync() error
}

// DeviceOpener opens a block device for writing.
type DeviceOpener interface {
	OpenWrite(path string) (WritableDevice, error)
}

// OSDevices opens devices read-write and exclusively (O_EXCL on a block device fails while it or one of
// its partitions is mounted or held), so Cairn never writes under a mounted filesystem.
type OSDevices struct{}

// OpenWrite implements DeviceOpener.
func (OSDevices) OpenWrite(path string) (WritableDevice, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_EXCL, 0)
}

const (
	wipeEnds   = 8 << 20 // zeroed at each end of the disk: every header and backup copy the prober knows
	wipeAround = 1 << 20 // zeroed at each signature and each old partition's start and end
	zeroChunk  = 1 << 20
)

// WipeVolume erases the disk that carries cluster clusterID's label for volume v (Reset). Only such a disk
// is ever touched: a disk with anything else on it, or one that is not a candidate (the boot medium), is
// skipped. It returns the disk wiped, "" when none carried the label.
func (a *Applier) WipeVolume(disks []inventory.Disk, v plan.Volume, clusterID string) (string, error) {
	for _, d := range disks {
		if d.NotCandidate != "" {
			continue
		}
		if _, _, own := plan.OwnPartition(d, v, clusterID); !own {
			continue
		}
		a.logf("%s: wiping %s (%s)", v, d.Path, plan.DescribeContents(d))
		return d.Path, a.Wipe(d)
	}
	return "", nil
}

// Wipe erases everything the inventory saw on the disk: both ends of it, each signature (the btrfs mirror
// at 64 MiB, say) and the start and end of each old partition, where filesystems and RAID superblocks
// live. A plan's wipe-and-format and an install with wipe use it.
func (a *Applier) Wipe(d inventory.Disk) error {
	dev, err := a.devices().OpenWrite(d.Path)
	if err != nil {
		return fmt.Errorf("open %s to wipe it: %w", d.Path, err)
	}
	size := int64(d.Size)
	ranges := [][2]int64{{0, wipeEnds}, {size - wipeEnds, size}}
	for _, s := range d.Signatures {
		ranges = append(ranges, [2]int64{s.Offset, s.Offset + wipeAround})
	}
	for _, p := range d.Partitions {
		start, end := int64(p.Start), int64(p.Start+p.Size)
		ranges = append(ranges, [2]int64{start, start + wipeAround}, [2]int64{end - wipeAround, end})
		for _, s := range p.Signatures {
			ranges = append(ranges, [2]int64{start + s.Offset, start + s.Offset + wipeAround})
		}
	}
	zeros := make([]byte, zeroChunk)
	for _, r := range ranges {
		lo, hi := max(r[0], 0), min(r[1], size)
		for off := lo; off < hi; off += zeroChunk {
			if _, err := dev.WriteAt(zeros[:min(zeroChunk, hi-off)], off); err != nil {
				dev.Close()
				return fmt.Errorf("wipe %s at byte %d: %w", d.Path, off, err)
			}
		}
	}
	if err := dev.Sync(); err != nil {
		dev.Close()
		return fmt.Errorf("wipe %s: sync: %w", d.Path, err)
	}
	return dev.Close()
}

// partition writes Cairn's GPT: one partition from the first MiB to the end, labelled for the step's
// volume and cluster.
func (a *Applier) partition(s plan.Step, d inventory.Disk) error {
	tab := gpt.Table{SectorSize: int64(d.SectorSize), Size: int64(d.Size)}
	typ, err := gpt.ParseGUID(s.Volume.PartitionType())
	if err != nil {
		return err
	}
	diskGUID, err := a.newGUID()
	if err != nil {
		return err
	}
	partGUID, err := a.newGUID()
	if err != nil {
		return err
	}
	tab.DiskGUID = diskGUID
	tab.Partitions = []gpt.Partition{{Type: typ, GUID: partGUID, Name: s.PartitionName,
		FirstLBA: tab.AlignedStart(), LastLBA: tab.LastUsable()}}
	dev, err := a.devices().OpenWrite(d.Path)
	if err != nil {
		return fmt.Errorf("open %s to partition it: %w", d.Path, err)
	}
	if err := tab.Write(dev); err != nil {
		dev.Close()
		return fmt.Errorf("partition %s: %w", d.Path, err)
	}
	if err := dev.Sync(); err != nil {
		dev.Close()
		return fmt.Errorf("partition %s: sync: %w", d.Path, err)
	}
	if err := dev.Close(); err != nil {
		return fmt.Errorf("partition %s: close: %w", d.Path, err)
	}
	return nil
}

// PartitionDevices finds the device of a partition whose table the kernel may not have read yet.
type PartitionDevices interface {
	// Device returns the path and MAJOR:MINOR of partition number n of disk d.
	Device(ctx context.Context, d inventory.Disk, n int) (path, dev string, err error)
}

// KernelPartitions asks the kernel to re-read the partition table (blockdev --rereadpt) and waits until the
// partition's device exists: devtmpfs creates it, there is no udev to wait for.
type KernelPartitions struct {
	Runner Runner
	Disks  DiskReader
	// Reread asks the kernel to re-read a disk's partition table (the BLKRRPART ioctl); nil runs
	// `blockdev --rereadpt` through Runner.
	Reread func(path string) error
	// Wait bounds the wait for the device; 0 means 10 s.
	Wait time.Duration
}

// Device implements PartitionDevices.
func (k KernelPartitions) Device(ctx context.Context, d inventory.Disk, n int) (string, string, error) {
	var err error
	if k.Reread != nil {
		err = k.Reread(d.Path)
	} else {
		_, err = k.Runner.Run(ctx, "blockdev", "--rereadpt", d.Path)
	}
	if err != nil {
		return "", "", fmt.Errorf("make the kernel re-read the partition table of %s: %w", d.Path, err)
	}
	wait := k.Wait
	if wait == 0 {
		wait = 10 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		cur, err := k.Disks.Disk(ctx, d.Name)
		if err != nil {
			return "", "", err
		}
		for _, p := range cur.Partitions {
			if p.Number != n || p.Path == "" {
				continue
			}
			if _, err := os.Stat(p.Path); err == nil {
				return p.Path, p.Dev, nil
			}
		}
		if time.Now().After(deadline) {
			return "", "", fmt.Errorf("partition %d of %s did not appear within %s after re-reading the table (does the kernel read GPT? CONFIG_EFI_PARTITION)", n, d.Path, wait)
		}
		select {
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// mkfs creates the volume's filesystem with Cairn's label and a fresh UUID. Discard is skipped: it can take
// minutes on a large disk and the disk is new or wiped anyway.
func (a *Applier) mkfs(ctx context.Context, s plan.Step, part string) (string, error) {
	id, err := a.newGUID()
	if err != nil {
		return "", err
	}
	uuid := id.String()
	var tool string
	var args []string
	switch s.Filesystem {
	case config.FilesystemXFS:
		tool, args = "mkfs.xfs", []string{"-q", "-K", "-L", s.FSLabel, "-m", "uuid=" + uuid, part}
	case config.FilesystemExt4:
		tool, args = "mkfs.ext4", []string{"-q", "-E", "nodiscard", "-L", s.FSLabel, "-U", uuid, part}
	default:
		return "", fmt.Errorf("%s: cannot format %s as %q: want xfs or ext4", s.Field, part, s.Filesystem)
	}
	if _, err := a.Runner.Run(ctx, tool, args...); err != nil {
		return "", fmt.Errorf("format %s as %s: %w", part, s.Filesystem, err)
	}
	return uuid, nil
}

// fsck checks a filesystem before its read-write mount and repairs what the tool can repair on its own.
func (a *Applier) fsck(ctx context.Context, fstype, part string) (string, error) {
	switch fstype {
	case config.FilesystemExt4:
		// e2fsck -p: 0 clean, 1 errors fixed, 2 fixed and wants a reboot (not for an unmounted data
		// volume), 4 and up: errors left or the check failed.
		_, err := a.Runner.Run(ctx, "e2fsck", "-p", part)
		var exit *ExitError
		switch {
		case err == nil:
			return "checked " + part + ": clean", nil
		case errors.As(err, &exit) && (exit.Code == 1 || exit.Code == 2):
			return "checked " + part + ": errors found and repaired", nil
		default:
			return "", fmt.Errorf("%s has errors e2fsck cannot repair on its own; repair it on another machine (e2fsck %s) or wipe it (cairnctl reset, or the disk's wipe: true): %w", part, part, err)
		}
	case config.FilesystemXFS:
		// xfs_repair -n: 0 clean, 1 corruption found; 2 means a dirty log, which the mount replays. A node
		// that went down with the volume mounted has a dirty log, and -n then says so and exits 1 over
		// the "corruption" it sees in the unreplayed metadata: that too is the mount's to replay.
		out, err := a.Runner.Run(ctx, "xfs_repair", "-n", part)
		var exit *ExitError
		switch {
		case err == nil:
			return "checked " + part + ": clean", nil
		case errors.As(err, &exit) && (exit.Code == 2 || exit.Code == 1 && bytes.Contains(out, []byte("metadata changes in a log"))):
			return "checked " + part + ": log needs replay, left to the mount", nil
		case errors.As(err, &exit) && exit.Code == 1:
			if _, err := a.Runner.Run(ctx, "xfs_repair", part); err != nil {
				return "", fmt.Errorf("%s is corrupt and xfs_repair could not repair it; repair it on another machine (xfs_repair %s) or wipe it (cairnctl reset, or the disk's wipe: true): %w", part, part, err)
			}
			return "checked " + part + ": corruption found and repaired", nil
		default:
			return "", fmt.Errorf("check %s: %w", part, err)
		}
	}
	return "", fmt.Errorf("cannot check %s: unknown filesystem %q", part, fstype)
}
