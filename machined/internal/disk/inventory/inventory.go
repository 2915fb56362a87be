// Package inventory lists the node's block devices from sysfs: size, model, serial, WWN, flags, by-id
// names, partitions, and what the prober finds on each disk and partition. It also picks the one disk a
// selector of the machine config names (match.go).
//
// Everything is read below two roots given by the caller (normally /sys and /dev), so unit tests run over a
// fake tree and sandbox mode (`machined --root DIR`) sees only its own devices. Device contents are read
// through Opener, read-only.
//
// Cairn has no udev, so /dev/disk/by-id usually does not exist on a node: the inventory reads the links
// when they are there and adds the names udev would give for what sysfs tells (virtio-SERIAL,
// wwn-0xWWN, nvme-MODEL_SERIAL), so a by-id path in a config means the same disk with or without udev.
package inventory

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

// Disk is one whole block device.
type Disk struct {
	Name string `json:"name"` // kernel name: sda, vdb, nvme0n1, loop3
	Path string `json:"path"` // DevRoot/Name
	Dev  string `json:"dev"`  // MAJOR:MINOR
	Size uint64 `json:"size"` // bytes
	// SectorSize is the logical block size, the unit of partition tables on this disk.
	SectorSize uint64 `json:"sectorSize"`
	Model      string `json:"model,omitempty"`
	Serial     string `json:"serial,omitempty"`
	WWN        string `json:"wwn,omitempty"`
	Rotational bool   `json:"rotational"`
	Removable  bool   `json:"removable"`
	ReadOnly   bool   `json:"readOnly"`
	// ByID are by-id paths for this disk: the links under DevRoot/disk/by-id and the names udev would give.
	ByID []string `json:"byID,omitempty"`
	// Holders are the devices built on top of this disk (dm-0, md0): someone else is using it.
	Holders    []string          `json:"holders,omitempty"`
	Partitions []Partition       `json:"partitions,omitempty"`
	Signatures []probe.Signature `json:"signatures,omitempty"`
	// ProbeError is why the contents could not be read; such a disk is never treated as blank.
	ProbeError string `json:"probeError,omitempty"`
	// NotCandidate says why no selector may ever pick this disk, worded to follow "is": "the boot medium",
	// "read-only", "in use by dm-0"; empty for a candidate.
	NotCandidate string `json:"notCandidate,omitempty"`
}

// Partition is one partition: from the partition table on the disk, and the kernel's device when it has one.
type Partition struct {
	Number int    `json:"number"`
	Name   string `json:"name,omitempty"` // kernel name (sda1, loop0p1); empty until the kernel has read the table
	Path   string `json:"path,omitempty"`
	Dev    string `json:"dev,omitempty"`
	Start  uint64 `json:"start"` // bytes from the start of the disk
	Size   uint64 `json:"size"`
	// Type, UUID and Label come from the table: GPT type GUID or DOS type, PARTUUID, GPT name (PARTLABEL).
	Type       string            `json:"type,omitempty"`
	UUID       string            `json:"uuid,omitempty"`
	Label      string            `json:"label,omitempty"`
	Holders    []string          `json:"holders,omitempty"`
	Signatures []probe.Signature `json:"signatures,omitempty"`
}

// Device is an open block device, read-only.
type Device interface {
	io.ReaderAt
	io.Closer
}

// Opener opens a block device read-only.
type Opener interface {
	Open(path string) (Device, error)
}

// OSOpener opens devices with os.Open (O_RDONLY).
type OSOpener struct{}

// Open implements Opener.
func (OSOpener) Open(path string) (Device, error) { return os.Open(path) }

// NotCandidateBoot marks the disk the node booted from.
const NotCandidateBoot = "the boot medium"

// Scanner reads the inventory.
type Scanner struct {
	SysRoot string // normally /sys
	DevRoot string // normally /dev
	Opener  Opener // nil means OSOpener
	// Boot names the device(s) the node booted from, by kernel name (vda, vda2, sr0), path (/dev/sr0) or
	// MAJOR:MINOR. The disk holding any of them is never a candidate.
	Boot []string
	// SignaturesOnly reads known signatures only (probe.Signatures): a disk with none reads as blank even
	// if it holds other data, and a blank disk's first and last 2 MiB are not read. For finding a disk by
	// its label, never for deciding what may be formatted.
	SignaturesOnly bool
}

// Scan lists every block device except RAM disks (ram*, zram*) and loop and nbd devices with nothing
// attached.
func (s Scanner) Scan(ctx context.Context) ([]Disk, error) {
	entries, err := os.ReadDir(filepath.Join(s.SysRoot, "block"))
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	links := s.byIDLinks()
	var disks []Disk
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := e.Name()
		if strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "zram") {
			continue
		}
		d, err := s.disk(name, links)
		if err != nil {
			return nil, err
		}
		if (strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "nbd")) && d.Size == 0 {
			continue // a loop or network block device with nothing attached
		}
		disks = append(disks, d)
	}
	sort.Slice(disks, func(i, j int) bool { return disks[i].Name < disks[j].Name })
	return disks, nil
}

// Disk reads one disk by kernel name, as Scan would list it; Apply uses it to re-read a disk just before
// changing it.
func (s Scanner) Disk(ctx context.Context, name string) (Disk, error) {
	if err := ctx.Err(); err != nil {
		return Disk{}, err
	}
	if _, err := os.Stat(filepath.Join(s.SysRoot, "block", name)); err != nil {
		return Disk{}, fmt.Errorf("disk %s: %w", name, err)
	}
	return s.disk(name, s.byIDLinks())
}

func (s Scanner) disk(name string, links map[string][]string) (Disk, error) {
	dir := filepath.Join(s.SysRoot, "block", name)
	sectors, err := readUint(filepath.Join(dir, "size"))
	if err != nil {
		return Disk{}, fmt.Errorf("disk %s: size: %w", name, err)
	}
	d := Disk{
		Name:       name,
		Path:       filepath.Join(s.DevRoot, name),
		Dev:        readAttr(dir, "dev"),
		Size:       sectors * 512, // sysfs counts 512-byte sectors whatever the device's sector size
		SectorSize: 512,
		Model:      readAttr(dir, "device/model"),
		Rotational: readAttr(dir, "queue/rotational") == "1",
		Removable:  readAttr(dir, "removable") == "1",
		ReadOnly:   readAttr(dir, "ro") == "1",
		Holders:    listDir(filepath.Join(dir, "holders")),
	}
	if v, err := readUint(filepath.Join(dir, "queue/logical_block_size")); err == nil && v > 0 {
		d.SectorSize = v
	}
	d.Serial = serial(dir, name, d.Model, links[name])
	d.WWN = firstAttr(dir, "wwid", "device/wwid", "device/wwn")
	d.ByID = byIDNames(s.DevRoot, d, links[name])
	kernelParts := s.kernelPartitions(dir, name)
	s.probeDisk(&d, kernelParts)
	d.NotCandidate = s.notCandidate(d)
	return d, nil
}

// probeDisk reads the disk's signatures and then each partition's contents through the same open device, so
// partitions are seen even when the kernel has not (yet) created their devices.
func (s Scanner) probeDisk(d *Disk, kernelParts map[int]Partition) {
	defer func() { d.Partitions = mergePartitions(d.Partitions, kernelParts) }()
	if d.Size == 0 {
		return
	}
	opener := s.Opener
	if opener == nil {
		opener = OSOpener{}
	}
	dev, err := opener.Open(d.Path)
	if err != nil {
		d.ProbeError = err.Error() // os errors name the path already
		return
	}
	defer dev.Close()
	size := int64(d.Size)
	read := probe.Probe
	if s.SignaturesOnly {
		read = probe.Signatures
	}
	sigs, err := read(dev, size)
	if err != nil {
		d.ProbeError = fmt.Sprintf("read %s: %v", d.Path, err)
		return
	}
	d.Signatures = sigs
	for _, sig := range sigs {
		if sig.Kind != probe.KindPartitionTable {
			continue
		}
		for _, p := range sig.Partitions {
			part := Partition{Number: p.Number, Start: uint64(p.Start), Size: uint64(p.Size), Type: p.Type,
				UUID: p.UUID, Label: p.Name}
			if p.Start >= 0 && p.Size > 0 && p.Start < size && !isExtendedContainer(p.Type) {
				length := min(p.Size, size-p.Start)
				ps, err := read(io.NewSectionReader(dev, p.Start, length), length)
				if err != nil {
					d.ProbeError = fmt.Sprintf("read partition %d of %s: %v", p.Number, d.Path, err)
					return
				}
				part.Signatures = ps
			}
			d.Partitions = append(d.Partitions, part)
		}
	}
}

func isExtendedContainer(typ string) bool { return typ == "0x05" || typ == "0x0f" || typ == "0x85" }

// kernelPartitions reads the partitions the kernel knows: subdirectories with a "partition" file.
func (s Scanner) kernelPartitions(dir, disk string) map[int]Partition {
	out := map[int]Partition{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), disk) {
			continue
		}
		pdir := filepath.Join(dir, e.Name())
		n, err := readUint(filepath.Join(pdir, "partition"))
		if err != nil {
			continue
		}
		start, _ := readUint(filepath.Join(pdir, "start"))
		size, _ := readUint(filepath.Join(pdir, "size"))
		out[int(n)] = Partition{Number: int(n), Name: e.Name(), Path: filepath.Join(s.DevRoot, e.Name()),
			Dev: readAttr(pdir, "dev"), Start: start * 512, Size: size * 512, Holders: listDir(filepath.Join(pdir, "holders"))}
	}
	return out
}

// mergePartitions adds the kernel's device names to the table's entries; partitions only the kernel knows
// (a table type the prober does not read) are listed too.
func mergePartitions(table []Partition, kernel map[int]Partition) []Partition {
	for i, p := range table {
		if k, ok := kernel[p.Number]; ok {
			table[i].Name, table[i].Path, table[i].Dev, table[i].Holders = k.Name, k.Path, k.Dev, k.Holders
			delete(kernel, p.Number)
		}
	}
	for _, k := range kernel {
		table = append(table, k)
	}
	sort.Slice(table, func(i, j int) bool { return table[i].Number < table[j].Number })
	return table
}

func (s Scanner) notCandidate(d Disk) string {
	switch {
	case s.isBoot(d):
		return NotCandidateBoot
	case d.ReadOnly:
		return "read-only"
	case d.Size == 0:
		return "empty (size 0)"
	case len(d.Holders) > 0:
		return "in use by " + strings.Join(d.Holders, ", ")
	}
	for _, p := range d.Partitions {
		if others := s.otherHolders(p.Holders); len(others) > 0 {
			return fmt.Sprintf("in use (partition %s by %s)", p.Name, strings.Join(others, ", "))
		}
	}
	return ""
}

// OwnMapperPrefix begins the device-mapper names of Cairn's own opened volumes (an encrypted STATE is
// cairn-state): a partition they hold is Cairn's volume in use by Cairn, still its to plan and mount.
const OwnMapperPrefix = "cairn-"

// otherHolders are the holders that are not Cairn's own opened volumes.
func (s Scanner) otherHolders(holders []string) []string {
	var out []string
	for _, h := range holders {
		name, _ := os.ReadFile(filepath.Join(s.SysRoot, "block", h, "dm", "name"))
		if !strings.HasPrefix(strings.TrimSpace(string(name)), OwnMapperPrefix) {
			out = append(out, h)
		}
	}
	return out
}

func (s Scanner) isBoot(d Disk) bool {
	for _, b := range s.Boot {
		b = strings.TrimPrefix(b, s.DevRoot+"/")
		if b == "" {
			continue
		}
		if b == d.Name || b == d.Dev {
			return true
		}
		for _, p := range d.Partitions {
			if p.Name != "" && (b == p.Name || b == p.Dev) {
				return true
			}
		}
	}
	return false
}

// serial finds the serial number where each bus keeps it: virtio in the block device, NVMe and some SCSI
// in device/serial, SCSI/SATA in VPD page 0x80, and as a last resort in udev's ata-MODEL_SERIAL link.
func serial(dir, name, model string, links []string) string {
	if v := firstAttr(dir, "serial", "device/serial"); v != "" {
		return v
	}
	if b, err := os.ReadFile(filepath.Join(dir, "device/vpd_pg80")); err == nil && len(b) > 4 {
		n := min(int(b[3]), len(b)-4)
		if v := strings.TrimSpace(strings.Trim(string(b[4:4+n]), "\x00")); v != "" {
			return v
		}
	}
	if model != "" {
		prefix := "ata-" + strings.ReplaceAll(model, " ", "_") + "_"
		for _, l := range links {
			if strings.HasPrefix(l, prefix) && len(l) > len(prefix) {
				return l[len(prefix):]
			}
		}
	}
	return ""
}

// byIDLinks maps kernel names to the link names in DevRoot/disk/by-id that point at them.
func (s Scanner) byIDLinks() map[string][]string {
	dir := filepath.Join(s.DevRoot, "disk", "by-id")
	out := map[string][]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		out[filepath.Base(target)] = append(out[filepath.Base(target)], e.Name())
	}
	return out
}

func byIDNames(devRoot string, d Disk, links []string) []string {
	names := map[string]bool{}
	for _, l := range links {
		names[l] = true
	}
	udevSafe := func(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), " ", "_") }
	if strings.HasPrefix(d.Name, "vd") && d.Serial != "" {
		names["virtio-"+udevSafe(d.Serial)] = true
	}
	if strings.HasPrefix(d.Name, "nvme") && d.Model != "" && d.Serial != "" {
		names["nvme-"+udevSafe(d.Model)+"_"+udevSafe(d.Serial)] = true
	}
	if w := NormalizeWWN(d.WWN); w != "" && strings.HasPrefix(strings.ToLower(d.WWN), "naa.") {
		names["wwn-0x"+w] = true
	}
	var out []string
	for n := range names {
		out = append(out, filepath.Join(devRoot, "disk", "by-id", n))
	}
	sort.Strings(out)
	return out
}

// NormalizeWWN strips the naa./eui./0x prefixes and lower-cases, so the forms sysfs, udev and people write
// compare equal.
func NormalizeWWN(w string) string {
	w = strings.ToLower(strings.TrimSpace(w))
	for _, p := range []string{"naa.", "eui.", "wwn-", "0x"} {
		w = strings.TrimPrefix(w, p)
	}
	return w
}

func readAttr(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func firstAttr(dir string, names ...string) string {
	for _, n := range names {
		if v := readAttr(dir, n); v != "" {
			return v
		}
	}
	return ""
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// listDir names the entries of a directory; none when it is missing or unreadable.
func listDir(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
