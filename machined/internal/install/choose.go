package install

import (
	"fmt"
	"strings"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/machined/internal/disk/gpt"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
)

// Partition types of the installed layout (the same as cairn.raw's, image/internal/boot).
const (
	espType     = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b" // EFI system partition
	payloadType = "0fc63daf-8483-4772-8e79-3d69d8477de4" // Linux filesystem data
)

// Choose picks the disk to install onto and says whether it must be wiped first. The disk rules: the
// selector must match exactly one candidate disk (never the boot medium, a read-only disk or one in use:
// inventory.Match); a disk with a mounted filesystem is refused even with wipe; a disk Cairn could not
// read is refused; anything on the disk (a filesystem, a partition table, another Cairn install) is
// erased only when wipe is set, and otherwise refused with what was found.
func Choose(disks []inventory.Disk, sel config.Selector, wipe bool, mounts string) (d inventory.Disk, erase bool, err error) {
	if sel.IsZero() {
		return d, false, fmt.Errorf("no disk to install onto: pass --disk (e.g. serial=...) or set machine.install.disk in the config")
	}
	d, err = inventory.Match(disks, sel)
	if err != nil {
		return d, false, fmt.Errorf("install disk: %w", err)
	}
	if where := mountedFrom(d, mounts); where != "" {
		return d, false, fmt.Errorf("%s is in use: %s; Cairn never installs onto a disk that is mounted", d.Describe(), where)
	}
	if d.ProbeError != "" {
		return d, false, fmt.Errorf("could not read %s (%s); Cairn installs only onto disks it has read", d.Describe(), d.ProbeError)
	}
	if len(d.Signatures) == 0 && len(d.Partitions) == 0 {
		return d, false, nil
	}
	if !wipe {
		return d, false, fmt.Errorf("%s holds %s; Cairn installs only onto a blank disk: pass --wipe (or set machine.install.wipe) to erase it",
			d.Describe(), plan.DescribeContents(d))
	}
	return d, true, nil
}

// mountedFrom says which of the disk's devices is mounted where, from /proc/self/mounts; "" when none.
func mountedFrom(d inventory.Disk, mounts string) string {
	devs := map[string]bool{d.Path: true}
	for _, p := range d.Partitions {
		if p.Path != "" {
			devs[p.Path] = true
		}
	}
	var found []string
	for _, line := range strings.Split(mounts, "\n") {
		if f := strings.Fields(line); len(f) > 1 && devs[f[0]] {
			found = append(found, f[0]+" is mounted on "+f[1])
		}
	}
	return strings.Join(found, ", ")
}

// Layout is the partition table of an installed disk: the ESP from the first MiB, then the payload slots A
// and B, each api/upgrade.SlotSize — the layout of cairn.raw, so an upgrade writes either the same way.
// The rest of the disk stays unpartitioned: Cairn's volumes go on disks of their own.
func Layout(d inventory.Disk, espSize int64, guids func() (gpt.GUID, error)) (gpt.Table, error) {
	sector := int64(d.SectorSize)
	if sector == 0 {
		sector = 512
	}
	t := gpt.Table{SectorSize: sector, Size: int64(d.Size)}
	need := upgrade.ESPStart + espSize + 2*upgrade.SlotSize + upgrade.ESPStart // the backup table at the end
	if int64(d.Size) < need {
		return t, fmt.Errorf("%s is too small: the ESP (%d MiB) and two payload slots (%d MiB each) need %d MiB",
			d.Describe(), espSize>>20, int64(upgrade.SlotSize)>>20, need>>20)
	}
	var err error
	if t.DiskGUID, err = guids(); err != nil {
		return t, err
	}
	parts := []struct {
		name, typ   string
		start, size int64
	}{
		{upgrade.ESPLabel, espType, upgrade.ESPStart, espSize},
		{payloadLabelA, payloadType, upgrade.ESPStart + espSize, upgrade.SlotSize},
		{payloadLabelB, payloadType, upgrade.ESPStart + espSize + upgrade.SlotSize, upgrade.SlotSize},
	}
	for _, p := range parts {
		typ, err := gpt.ParseGUID(p.typ)
		if err != nil {
			return t, err
		}
		id, err := guids()
		if err != nil {
			return t, err
		}
		t.Partitions = append(t.Partitions, gpt.Partition{Type: typ, GUID: id, Name: p.name,
			FirstLBA: uint64(p.start / sector), LastLBA: uint64((p.start+p.size)/sector - 1)})
	}
	return t, t.Validate()
}
