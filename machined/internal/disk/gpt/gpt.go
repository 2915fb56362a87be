// Package gpt writes a GUID partition table (UEFI specification, chapter 5): a protective MBR, the primary
// header and entry array at the start of the device, and the backup entry array and header at its end.
//
// Cairn writes its own tables so the image needs no partitioning tool; reading them back is the job of
// package probe, which the tests use to check what was written here.
package gpt

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"unicode/utf16"
)

// GUID is 16 bytes in the GPT's on-disk order (first three fields little-endian).
type GUID [16]byte

// ParseGUID reads the usual text form, e.g. 0fc63daf-8483-4772-8e79-3d69d8477de4.
func ParseGUID(s string) (GUID, error) {
	var g GUID
	h := strings.ReplaceAll(s, "-", "")
	raw, err := hex.DecodeString(h)
	if err != nil || len(raw) != 16 || len(s) != 36 {
		return g, fmt.Errorf("invalid GUID %q: want 8-4-4-4-12 hex digits", s)
	}
	// The text form is big-endian throughout; the first three fields are stored little-endian.
	binary.LittleEndian.PutUint32(g[0:], binary.BigEndian.Uint32(raw[0:]))
	binary.LittleEndian.PutUint16(g[4:], binary.BigEndian.Uint16(raw[4:]))
	binary.LittleEndian.PutUint16(g[6:], binary.BigEndian.Uint16(raw[6:]))
	copy(g[8:], raw[8:])
	return g, nil
}

// String prints the text form in lower case.
func (g GUID) String() string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", binary.LittleEndian.Uint32(g[0:]), binary.LittleEndian.Uint16(g[4:]),
		binary.LittleEndian.Uint16(g[6:]), g[8:10], g[10:16])
}

// NewGUID returns a random (version 4) GUID.
func NewGUID() (GUID, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return GUID{}, fmt.Errorf("random GUID: %w", err)
	}
	raw[6] = raw[6]&0x0f | 0x40
	raw[8] = raw[8]&0x3f | 0x80
	var g GUID
	binary.LittleEndian.PutUint32(g[0:], binary.BigEndian.Uint32(raw[0:]))
	binary.LittleEndian.PutUint16(g[4:], binary.BigEndian.Uint16(raw[4:]))
	binary.LittleEndian.PutUint16(g[6:], binary.BigEndian.Uint16(raw[6:]))
	copy(g[8:], raw[8:])
	return g, nil
}

// Partition is one entry to write. FirstLBA and LastLBA are inclusive, in sectors.
type Partition struct {
	Type, GUID        GUID
	Name              string // at most 36 UTF-16 code units
	FirstLBA, LastLBA uint64
}

// Table is a whole partition table for a device of Size bytes.
type Table struct {
	SectorSize int64 // 512 or 4096
	Size       int64
	DiskGUID   GUID
	Partitions []Partition
}

const (
	entryCount   = 128
	entrySize    = 128
	headerSize   = 92
	nameUnits    = 36
	alignment    = 1 << 20 // partitions start on a MiB boundary, as every current tool does
	mbrSignature = 0xaa55
)

// FirstUsable and LastUsable are the sectors partitions may occupy, between the two entry arrays.
func (t Table) FirstUsable() uint64 { return 2 + t.entrySectors() }

// LastUsable is the last sector before the backup entry array.
func (t Table) LastUsable() uint64 { return t.lastLBA() - 1 - t.entrySectors() }

// AlignedStart is the first MiB-aligned usable sector: where a single partition should begin.
func (t Table) AlignedStart() uint64 {
	per := uint64(alignment / t.SectorSize)
	return (t.FirstUsable() + per - 1) / per * per
}

func (t Table) entrySectors() uint64 {
	return uint64((entryCount*entrySize + t.SectorSize - 1) / t.SectorSize)
}

func (t Table) lastLBA() uint64 { return uint64(t.Size/t.SectorSize) - 1 }

// Validate checks the table fits the device and the entries make sense.
func (t Table) Validate() error {
	if t.SectorSize != 512 && t.SectorSize != 4096 {
		return fmt.Errorf("gpt: sector size %d: want 512 or 4096", t.SectorSize)
	}
	if t.Size/t.SectorSize < int64(2*t.entrySectors()+3+uint64(alignment/t.SectorSize)) {
		return fmt.Errorf("gpt: device of %d bytes is too small for a partition table", t.Size)
	}
	if len(t.Partitions) > entryCount {
		return fmt.Errorf("gpt: %d partitions: at most %d", len(t.Partitions), entryCount)
	}
	for i, p := range t.Partitions {
		if p.FirstLBA < t.FirstUsable() || p.LastLBA > t.LastUsable() || p.LastLBA < p.FirstLBA {
			return fmt.Errorf("gpt: partition %d (sectors %d-%d) lies outside the usable sectors %d-%d",
				i+1, p.FirstLBA, p.LastLBA, t.FirstUsable(), t.LastUsable())
		}
		if n := len(utf16.Encode([]rune(p.Name))); n > nameUnits {
			return fmt.Errorf("gpt: partition %d name %q is %d UTF-16 units long: at most %d", i+1, p.Name, n, nameUnits)
		}
	}
	return nil
}

// Write writes the protective MBR, both headers and both entry arrays. The caller syncs.
func (t Table) Write(w io.WriterAt) error {
	if err := t.Validate(); err != nil {
		return err
	}
	entries := t.entries()
	writes := []struct {
		what string
		off  int64
		data []byte
	}{
		{"protective MBR", 0, t.protectiveMBR()},
		{"primary partition entries", 2 * t.SectorSize, entries},
		{"backup partition entries", int64(t.LastUsable()+1) * t.SectorSize, entries},
		{"backup header", int64(t.lastLBA()) * t.SectorSize, t.header(t.lastLBA(), 1, t.LastUsable()+1, entries)},
		// The primary header last: until it is written, no tool sees a half-written table as valid.
		{"primary header", t.SectorSize, t.header(1, t.lastLBA(), 2, entries)},
	}
	for _, wr := range writes {
		if _, err := w.WriteAt(wr.data, wr.off); err != nil {
			return fmt.Errorf("gpt: write %s at byte %d: %w", wr.what, wr.off, err)
		}
	}
	return nil
}

func (t Table) protectiveMBR() []byte {
	b := make([]byte, t.SectorSize)
	e := b[446:]
	e[1], e[2], e[3] = 0x00, 0x02, 0x00 // CHS of LBA 1
	e[4] = 0xee
	e[5], e[6], e[7] = 0xff, 0xff, 0xff
	binary.LittleEndian.PutUint32(e[8:], 1)
	binary.LittleEndian.PutUint32(e[12:], uint32(min(t.lastLBA(), 0xffffffff)))
	binary.LittleEndian.PutUint16(b[510:], mbrSignature)
	return b
}

func (t Table) entries() []byte {
	b := make([]byte, t.entrySectors()*uint64(t.SectorSize))
	for i, p := range t.Partitions {
		e := b[i*entrySize:]
		copy(e[0:16], p.Type[:])
		copy(e[16:32], p.GUID[:])
		binary.LittleEndian.PutUint64(e[32:], p.FirstLBA)
		binary.LittleEndian.PutUint64(e[40:], p.LastLBA)
		for j, u := range utf16.Encode([]rune(p.Name)) {
			binary.LittleEndian.PutUint16(e[56+2*j:], u)
		}
	}
	return b
}

func (t Table) header(my, alt, entriesLBA uint64, entries []byte) []byte {
	b := make([]byte, t.SectorSize)
	h := b[:headerSize]
	copy(h, "EFI PART")
	binary.LittleEndian.PutUint32(h[8:], 0x00010000) // revision 1.0
	binary.LittleEndian.PutUint32(h[12:], headerSize)
	binary.LittleEndian.PutUint64(h[24:], my)
	binary.LittleEndian.PutUint64(h[32:], alt)
	binary.LittleEndian.PutUint64(h[40:], t.FirstUsable())
	binary.LittleEndian.PutUint64(h[48:], t.LastUsable())
	copy(h[56:72], t.DiskGUID[:])
	binary.LittleEndian.PutUint64(h[72:], entriesLBA)
	binary.LittleEndian.PutUint32(h[80:], entryCount)
	binary.LittleEndian.PutUint32(h[84:], entrySize)
	binary.LittleEndian.PutUint32(h[88:], crc32.ChecksumIEEE(entries[:entryCount*entrySize]))
	binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h))
	return b
}

// ErrTooLong is returned by FitName when nothing of the suffix fits.
var ErrTooLong = errors.New("gpt: partition name prefix leaves no room")

// FitName returns prefix+suffix cut to the 36 UTF-16 units a partition name holds, never splitting a
// surrogate pair. It reports whether the suffix had to be shortened.
func FitName(prefix, suffix string) (string, bool, error) {
	room := nameUnits - len(utf16.Encode([]rune(prefix)))
	if room <= 0 {
		return "", false, ErrTooLong
	}
	var out []rune
	used := 0
	for _, r := range suffix {
		n := len(utf16.Encode([]rune{r}))
		if used+n > room {
			return prefix + string(out), true, nil
		}
		out = append(out, r)
		used += n
	}
	return prefix + suffix, false, nil
}
