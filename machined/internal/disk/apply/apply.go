// Package apply carries out one step of a disk plan: partition, format, check and mount a volume, or
// mount a tmpfs.
//
// It trusts the plan only as far as the disk still looks the same: right before anything destructive it
// re-reads the disk and aborts if what it finds differs in any way from what the plan saw. Every step is
// idempotent: run again (after a power cut, or on every boot), it finds its own earlier work, finishes
// what is missing and leaves the rest alone.
package apply

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-os/cairn/machined/internal/disk/gpt"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

// DiskReader reads one disk as the inventory does; *inventory.Scanner implements it.
type DiskReader interface {
	Disk(ctx context.Context, name string) (inventory.Disk, error)
}

// Applier carries out plan steps. Runner, Mounter and Disks are required.
type Applier struct {
	Disks   DiskReader
	Runner  Runner
	Mounter Mounter
	// Devices opens disks for writing; nil means OSDevices.
	Devices DeviceOpener
	// MountInfo is the mount table to read; "" means DefaultMountInfo.
	MountInfo string
	// Root is put in front of every mount target (sandbox mode, tests); "" means /.
	Root string
	// Log receives one line per action taken; nil discards them.
	Log func(format string, args ...any)
	// Partitions finds a partition's device once its table is written; nil means KernelPartitions.
	Partitions PartitionDevices
	// Reread is KernelPartitions' way to make the kernel re-read a table (nil: blockdev).
	Reread func(path string) error
	// NewGUID makes partition GUIDs and filesystem UUIDs; nil means gpt.NewGUID.
	NewGUID func() (gpt.GUID, error)
	// Crypt makes and opens encrypted volumes; nil refuses them (sandbox mode).
	Crypt Crypter
	// RecoveryKey also opens a volume this Applier encrypts ("" for none): the admin's, sent with Init or
	// Join and kept nowhere on the node.
	RecoveryKey string
	// ReadDevice and DevNumber read an opened encrypted volume (nil: the device files themselves).
	ReadDevice func(path string) (ReadSeekCloser, error)
	DevNumber  func(path string) (string, error)
}

// Result is what a step did.
type Result struct {
	Volume     plan.Volume `json:"volume"`
	Device     string      `json:"device"` // the partition mounted, or "tmpfs"
	Target     string      `json:"target"`
	Filesystem string      `json:"filesystem"`
	UUID       string      `json:"uuid,omitempty"`      // of a filesystem made by this run
	Did        []string    `json:"did"`                 // what was done, in order; empty when all was in place
	Encrypted  bool        `json:"encrypted,omitempty"` // Device is an opened encrypted volume
}

// Apply carries out one step. A Refuse step returns its refusal.
func (a *Applier) Apply(ctx context.Context, s plan.Step) (Result, error) {
	r := Result{Volume: s.Volume, Target: s.Target}
	switch s.Action {
	case plan.Refuse:
		return r, s.Err()
	case plan.Tmpfs:
		return a.applyTmpfs(r)
	case plan.Format, plan.WipeAndFormat, plan.Keep:
		if s.Disk == nil {
			return r, fmt.Errorf("%s: %s step without a disk", s.Field, s.Action)
		}
		return a.applyDisk(ctx, s, r)
	}
	return r, fmt.Errorf("%s: unknown action %q", s.Field, s.Action)
}

func (a *Applier) applyDisk(ctx context.Context, s plan.Step, r Result) (Result, error) {
	planned := *s.Disk
	cur, err := a.Disks.Disk(ctx, planned.Name)
	if err != nil {
		return r, fmt.Errorf("%s: re-read %s: %w", s.Field, planned.Path, err)
	}
	if cur.Size != planned.Size || cur.Serial != planned.Serial || cur.WWN != planned.WWN {
		return r, fmt.Errorf("%s: %s is no longer the disk the plan chose (was %s, now %s); plan again",
			s.Field, planned.Path, planned.Describe(), cur.Describe())
	}
	if cur.ProbeError != "" {
		return r, fmt.Errorf("%s: could not read %s: %s", s.Field, cur.Path, cur.ProbeError)
	}
	if cur.ReadOnly {
		// A disk that fails often turns read-only (the kernel or its controller does it): nothing can be
		// written, not even the journal replay a read-write mount starts with.
		return r, fmt.Errorf("%s: %s is read-only now: the disk or its controller refuses writes (a failing disk often does), so the volume cannot be mounted read-write; its data is untouched",
			s.Field, cur.Describe())
	}
	part, fstype, own := plan.OwnPartition(cur, s.Volume, s.ClusterID)
	switch {
	case own && s.Action == plan.Keep && plan.Fingerprint(cur) != plan.Fingerprint(planned):
		return r, a.changed(s, planned, cur)
	case own:
		// Cairn's own layout: kept from before, or made by an earlier run of this very plan.
	case s.Action == plan.Keep || plan.Fingerprint(cur) != plan.Fingerprint(planned):
		return r, a.changed(s, planned, cur)
	default:
		// Exactly what the plan saw, and the plan says format: the only way to a destructive write.
		if s.Action == plan.WipeAndFormat {
			a.logf("%s: wiping %s (%s)", s.Volume, cur.Path, plan.DescribeContents(cur))
			if err := a.Wipe(cur); err != nil {
				return r, fmt.Errorf("%s: %w", s.Field, err)
			}
			r.Did = append(r.Did, "wiped "+cur.Path)
			if cur, err = a.Disks.Disk(ctx, cur.Name); err != nil {
				return r, fmt.Errorf("%s: re-read %s after the wipe: %w", s.Field, planned.Path, err)
			}
			if len(cur.Signatures) > 0 {
				return r, fmt.Errorf("%s: %s still holds %s after the wipe", s.Field, cur.Path, probe.Describe(cur.Signatures))
			}
		}
		a.logf("%s: partitioning %s (%q)", s.Volume, cur.Path, s.PartitionName)
		if err := a.partition(s, cur); err != nil {
			return r, fmt.Errorf("%s: %w", s.Field, err)
		}
		r.Did = append(r.Did, "partitioned "+cur.Path)
		if cur, err = a.Disks.Disk(ctx, cur.Name); err != nil {
			return r, fmt.Errorf("%s: re-read %s after partitioning: %w", s.Field, planned.Path, err)
		}
		if part, fstype, own = plan.OwnPartition(cur, s.Volume, s.ClusterID); !own || fstype != "" {
			return r, fmt.Errorf("%s: %s does not read back as Cairn's empty partition after partitioning: %s",
				s.Field, cur.Path, plan.DescribeContents(cur))
		}
	}
	if part.Path == "" {
		// The table is on the disk but the kernel has not read it (just written, or attached since).
		if part.Path, part.Dev, err = a.partitionDevices().Device(ctx, cur, part.Number); err != nil {
			return r, fmt.Errorf("%s: %w", s.Field, err)
		}
	}
	r.Device = part.Path
	luks := ""
	if fstype == probe.TypeLUKS || fstype == "" && s.Encrypt {
		dev, devNum, inner, did, err := a.unlock(ctx, s, part.Path, fstype == "")
		r.Did = append(r.Did, did...)
		if err != nil {
			return r, err
		}
		// From here on the volume is the opened device: check, format and mount act on it.
		luks = part.Path
		part.Path, part.Dev, fstype, r.Device, r.Encrypted = dev, devNum, inner, dev, true
	}
	target := filepath.Join(a.root(), s.Target)
	mounted, err := a.isMounted(target, part.Dev)
	if err != nil {
		return r, fmt.Errorf("%s: %w", s.Field, err)
	}
	if mounted {
		r.Filesystem = fstype
		return r, nil
	}
	if fstype == "" {
		a.logf("%s: formatting %s as %s (label %s)", s.Volume, part.Path, s.Filesystem, s.FSLabel)
		if r.UUID, err = a.mkfs(ctx, s, part.Path); err != nil {
			return r, err
		}
		if luks != "" {
			if err := a.Crypt.Formatted(ctx, luks); err != nil {
				return r, fmt.Errorf("%s: %w", s.Field, err)
			}
		}
		fstype = s.Filesystem
		r.Did = append(r.Did, fmt.Sprintf("formatted %s as %s", part.Path, fstype))
	} else {
		a.logf("%s: checking %s (%s)", s.Volume, part.Path, fstype)
		did, err := a.fsck(ctx, fstype, part.Path)
		if err != nil {
			return r, fmt.Errorf("%s: %w", s.Field, err)
		}
		r.Did = append(r.Did, did)
	}
	r.Filesystem = fstype
	if err := os.MkdirAll(target, 0o755); err != nil {
		return r, fmt.Errorf("%s: create mount point: %w", s.Field, err)
	}
	a.logf("%s: mounting %s at %s", s.Volume, part.Path, target)
	if err := a.Mounter.Mount(part.Path, target, fstype, mountFlags(s.Volume), ""); err != nil {
		return r, fmt.Errorf("%s: mount %s (%s) at %s: %w", s.Field, part.Path, fstype, target, err)
	}
	r.Did = append(r.Did, fmt.Sprintf("mounted %s at %s", part.Path, target))
	return r, nil
}

func (a *Applier) applyTmpfs(r Result) (Result, error) {
	target := filepath.Join(a.root(), r.Target)
	r.Device, r.Filesystem = "tmpfs", "tmpfs"
	mounts, err := mountsAt(a.mountInfo(), target)
	if err != nil {
		return r, err
	}
	if n := len(mounts); n > 0 && mounts[n-1].FSType == "tmpfs" {
		return r, nil
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return r, fmt.Errorf("%s: create mount point: %w", r.Volume.Field(), err)
	}
	a.logf("%s: mounting tmpfs at %s", r.Volume, target)
	if err := a.Mounter.Mount("tmpfs", target, "tmpfs", mountFlags(r.Volume), "mode=0755"); err != nil {
		return r, fmt.Errorf("%s: mount tmpfs at %s: %w", r.Volume.Field(), target, err)
	}
	r.Did = append(r.Did, "mounted tmpfs at "+target)
	return r, nil
}

// isMounted reports whether the partition with device number dev is what is visible at target.
func (a *Applier) isMounted(target, dev string) (bool, error) {
	mounts, err := mountsAt(a.mountInfo(), target)
	if err != nil {
		return false, err
	}
	n := len(mounts)
	return n > 0 && dev != "" && mounts[n-1].Dev == dev, nil
}

func (a *Applier) changed(s plan.Step, planned, cur inventory.Disk) error {
	return fmt.Errorf("%s: %s changed since the plan: it held %s, now %s; nothing was written, plan again",
		s.Field, cur.Path, plan.DescribeContents(planned), plan.DescribeContents(cur))
}

func (a *Applier) devices() DeviceOpener {
	if a.Devices == nil {
		return OSDevices{}
	}
	return a.Devices
}

func (a *Applier) partitionDevices() PartitionDevices {
	if a.Partitions == nil {
		return KernelPartitions{Runner: a.Runner, Disks: a.Disks, Reread: a.Reread}
	}
	return a.Partitions
}

func (a *Applier) newGUID() (gpt.GUID, error) {
	if a.NewGUID == nil {
		return gpt.NewGUID()
	}
	return a.NewGUID()
}

func (a *Applier) mountInfo() string {
	if a.MountInfo == "" {
		return DefaultMountInfo
	}
	return a.MountInfo
}

func (a *Applier) root() string {
	if a.Root == "" {
		return "/"
	}
	return a.Root
}

func (a *Applier) logf(format string, args ...any) {
	if a.Log != nil {
		a.Log(format, args...)
	}
}
