// Package probe recognises what is on a block device: filesystems (xfs, ext2/3/4, vfat, btrfs, ISO9660,
// squashfs), partition tables (GPT, DOS/MBR), LUKS1/2, LVM2 physical volumes, MD RAID members and swap.
//
// Cairn decides whether it may format a disk from what this package finds, so it errs on the side of
// finding something: secondary headers (GPT backup, LUKS2 secondary, btrfs mirror) count, and a device
// that carries none of the known signatures but has non-zero bytes in its first or last 2 MiB is reported
// as "unknown" data rather than as blank.
//
// It reads only through an io.ReaderAt and never outside [0, size): every read is bounds-checked here, so
// a truncated image or a hostile header cannot make it read past the device.
package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
)

// Kind groups signature types by what they mean for the device.
type Kind string

// Kinds of signatures.
const (
	KindFilesystem     Kind = "filesystem"
	KindPartitionTable Kind = "partition table"
	KindCrypto         Kind = "crypto"
	KindRAID           Kind = "raid"
	KindLVM            Kind = "lvm"
	KindSwap           Kind = "swap"
	KindUnknown        Kind = "unknown"
)

// Signature types. The names are the ones blkid and lsblk print, which operators already know.
const (
	TypeXFS      = "xfs"
	TypeExt4     = "ext4"
	TypeExt3     = "ext3"
	TypeExt2     = "ext2"
	TypeJBD      = "jbd"
	TypeVFAT     = "vfat"
	TypeBtrfs    = "btrfs"
	TypeSwap     = "swap"
	TypeSuspend  = "swsuspend"
	TypeLUKS     = "crypto_LUKS"
	TypeLVM2     = "LVM2_member"
	TypeMD       = "linux_raid_member"
	TypeGPT      = "gpt"
	TypeDOS      = "dos"
	TypeISO9660  = "iso9660"
	TypeSquashfs = "squashfs"
	TypeUnknown  = "unknown"
)

// Signature is one thing found on a device.
type Signature struct {
	Type    string `json:"type"`
	Kind    Kind   `json:"kind"`
	Version string `json:"version,omitempty"` // LUKS "1"/"2", MD "1.2", FAT "FAT32", squashfs "4.0"
	Label   string `json:"label,omitempty"`
	UUID    string `json:"uuid,omitempty"`
	// Offset is the byte offset of the header or superblock that was recognised.
	Offset int64 `json:"offset"`
	// Partitions are the entries of a partition table.
	Partitions []Partition `json:"partitions,omitempty"`
	// Problem is set when the signature was found but is damaged or only a backup copy survives. Cairn never
	// treats a damaged signature as its own.
	Problem string `json:"problem,omitempty"`
}

// Partition is one entry of a GPT or DOS partition table.
type Partition struct {
	Number int   `json:"number"`
	Start  int64 `json:"start"` // bytes from the start of the device
	Size   int64 `json:"size"`  // bytes
	// Type is the GPT type GUID (lower case) or the DOS type byte as "0x83".
	Type string `json:"type"`
	// UUID is the GPT unique partition GUID (lower case) or DOS "DISKID-NN", as the kernel's PARTUUID.
	UUID string `json:"uuid,omitempty"`
	// Name is the GPT partition name (PARTLABEL).
	Name     string `json:"name,omitempty"`
	Bootable bool   `json:"bootable,omitempty"`
}

// Probe returns every signature found on the device of the given size, sorted by offset. An empty result
// means the device is blank: no known signature and only zero bytes in its first and last 2 MiB. An error is
// returned only when the device cannot be read; the caller must then treat the device as not blank.
func Probe(r io.ReaderAt, size int64) ([]Signature, error) { return probe(r, size, true) }

// Signatures returns the known signatures on the device, as Probe does, without looking for data that
// carries none: a device with no known signature comes back empty even when it holds data. It reads a few
// KiB of a device where Probe reads 4 MiB of a blank one, which is what finding a device by its label takes
// (STATE at boot); deciding that a device is blank, so that it may be formatted, takes Probe.
func Signatures(r io.ReaderAt, size int64) ([]Signature, error) { return probe(r, size, false) }

func probe(r io.ReaderAt, size int64, contents bool) ([]Signature, error) {
	if size < 0 {
		return nil, fmt.Errorf("probe: negative device size %d", size)
	}
	s := &source{r: r, size: size}
	var sigs []Signature
	for _, p := range probers {
		sigs = append(sigs, p(s)...)
		if s.err != nil {
			return nil, s.err
		}
	}
	sigs = dropShadowed(sigs)
	if len(sigs) == 0 && contents {
		if off, found := s.firstNonZero(); found {
			sigs = append(sigs, Signature{Type: TypeUnknown, Kind: KindUnknown, Offset: off,
				Problem: "non-zero data with no known signature"})
		}
		if s.err != nil {
			return nil, s.err
		}
	}
	sort.SliceStable(sigs, func(i, j int) bool {
		if sigs[i].Offset != sigs[j].Offset {
			return sigs[i].Offset < sigs[j].Offset
		}
		return sigs[i].Type < sigs[j].Type
	})
	return sigs, nil
}

// probers run in this order; each returns what it found (usually zero or one signature).
var probers = []func(*source) []Signature{
	probeGPT, probeDOS, probeXFS, probeExt, probeVFAT, probeBtrfs, probeSwap, probeLUKS, probeLVM2,
	probeMD, probeISO9660, probeSquashfs,
}

// dropShadowed removes the DOS reading of sectors that are really something else: the protective MBR of a
// GPT, and the boot sector of a FAT filesystem made on a whole device (it ends in 55 AA like an MBR).
func dropShadowed(sigs []Signature) []Signature {
	var hasGPT, fatAt0 bool
	for _, s := range sigs {
		hasGPT = hasGPT || s.Type == TypeGPT
		fatAt0 = fatAt0 || (s.Type == TypeVFAT && s.Offset == 0)
	}
	out := sigs[:0]
	for _, s := range sigs {
		if s.Type == TypeDOS && (fatAt0 || (hasGPT && protectiveOnly(s))) {
			continue
		}
		out = append(out, s)
	}
	return out
}

func protectiveOnly(s Signature) bool {
	for _, p := range s.Partitions {
		if p.Type != "0xee" {
			return false
		}
	}
	return len(s.Partitions) > 0
}

// zeroScan is how much of each end of a device is checked for stray data when no signature was found. Two
// MiB cover the first MiB-aligned partition's headers too, where an old filesystem would sit after only
// its partition table was erased.
const zeroScan = 2 << 20

// source is a bounds-checked view of the device. The first I/O error sticks and ends the probe.
type source struct {
	r    io.ReaderAt
	size int64
	err  error
}

// read returns n bytes at off, or nil when they are not all inside the device or could not be read.
func (s *source) read(off int64, n int) []byte {
	if s.err != nil || n <= 0 || off < 0 || off > s.size || int64(n) > s.size-off {
		return nil
	}
	b := make([]byte, n)
	got, err := s.r.ReadAt(b, off)
	if got == n {
		return b
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	s.err = fmt.Errorf("read %d bytes at offset %d: %w", n, off, err)
	return nil
}

// zeroChunk is what a blank device's chunk reads as (never written).
var zeroChunk [64 << 10]byte

// firstNonZero scans the first and last zeroScan bytes for any non-zero byte.
func (s *source) firstNonZero() (int64, bool) {
	scan := func(start, end int64) (int64, bool) {
		const chunk = int64(len(zeroChunk))
		for off := max(start, 0); off < end; off += chunk {
			b := s.read(off, int(min(chunk, end-off)))
			if bytes.Equal(b, zeroChunk[:len(b)]) {
				continue // the common case, compared many bytes at a time
			}
			for i, c := range b {
				if c != 0 {
					return off + int64(i), true
				}
			}
		}
		return 0, false
	}
	head := min(s.size, zeroScan)
	if off, ok := scan(0, head); ok {
		return off, true
	}
	return scan(max(head, s.size-zeroScan), s.size)
}
