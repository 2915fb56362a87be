package probe

import "fmt"

// DOS/MBR partition table: four 16-byte entries at byte 446 of sector 0 and the boot signature 55 AA at 510.
// Extended partitions (types 0x05, 0x0f, 0x85) hold a chain of EBRs, each with one logical partition and a
// link to the next.

const (
	mbrEntries      = 446
	mbrSectorSize   = 512
	maxLogicalParts = 128 // bounds a looping or hostile EBR chain
)

func probeDOS(s *source) []Signature {
	b := s.read(0, mbrSectorSize)
	if b == nil || b[510] != 0x55 || b[511] != 0xaa {
		return nil
	}
	entries, ok := mbrTable(b)
	if !ok {
		return nil
	}
	diskID := le.Uint32(b[440:])
	sig := Signature{Type: TypeDOS, Kind: KindPartitionTable}
	if diskID != 0 {
		sig.UUID = fmt.Sprintf("%08x", diskID)
	}
	for i, e := range entries {
		if e.typ == 0 {
			continue
		}
		sig.Partitions = append(sig.Partitions, e.partition(i+1, 0, diskID))
		if isExtended(e.typ) {
			sig.Partitions = append(sig.Partitions, logicalPartitions(s, int64(e.start), diskID)...)
		}
	}
	return []Signature{sig}
}

type mbrEntry struct {
	boot, typ     byte
	start, length uint32 // in 512-byte sectors
}

// mbrTable decodes the four entries; ok is false when a boot flag is neither 0x00 nor 0x80, which is how a
// boot sector that is not a partition table (a FAT or NTFS volume, say) usually shows.
func mbrTable(b []byte) ([4]mbrEntry, bool) {
	var out [4]mbrEntry
	for i := range out {
		e := b[mbrEntries+16*i:]
		out[i] = mbrEntry{boot: e[0], typ: e[4], start: le.Uint32(e[8:]), length: le.Uint32(e[12:])}
		if e[0] != 0 && e[0] != 0x80 {
			return out, false
		}
	}
	return out, true
}

func (e mbrEntry) partition(number int, base int64, diskID uint32) Partition {
	p := Partition{
		Number:   number,
		Start:    (base + int64(e.start)) * mbrSectorSize,
		Size:     int64(e.length) * mbrSectorSize,
		Type:     fmt.Sprintf("0x%02x", e.typ),
		Bootable: e.boot == 0x80,
	}
	if diskID != 0 {
		p.UUID = fmt.Sprintf("%08x-%02x", diskID, number)
	}
	return p
}

func isExtended(t byte) bool { return t == 0x05 || t == 0x0f || t == 0x85 }

// logicalPartitions walks the EBR chain of the extended partition starting at sector ext. Each EBR's first
// entry is relative to that EBR, its second (the link) relative to the start of the extended partition.
func logicalPartitions(s *source, ext int64, diskID uint32) []Partition {
	var out []Partition
	seen := map[int64]bool{}
	for cur := ext; len(out) < maxLogicalParts && !seen[cur]; {
		seen[cur] = true
		b := s.read(cur*mbrSectorSize, mbrSectorSize)
		if b == nil || b[510] != 0x55 || b[511] != 0xaa {
			break
		}
		entries, ok := mbrTable(b)
		if !ok {
			break
		}
		if entries[0].typ != 0 && entries[0].length != 0 {
			out = append(out, entries[0].partition(5+len(out), cur, diskID))
		}
		if entries[1].typ == 0 || !isExtended(entries[1].typ) || entries[1].start == 0 {
			break
		}
		cur = ext + int64(entries[1].start)
	}
	return out
}
