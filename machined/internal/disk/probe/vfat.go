package probe

import "fmt"

// FAT12/16/32: a boot sector at byte 0 whose BIOS parameter block describes the geometry. There is no magic
// number, so the BPB must be plausible (jump instruction, power-of-two sector and cluster sizes, one or two
// FATs, a known media byte). The label lives in the root directory (an entry with the volume-label
// attribute) and, as a copy, in the extended boot record; the root directory wins, as with mlabel and blkid.

const (
	fatAttrVolumeID = 0x08
	fatAttrLFN      = 0x0f
	fatNoName       = "NO NAME"
	fatMaxRootRead  = 64 << 10
)

type fatBPB struct {
	bytesPerSector, reservedSectors, rootEntries uint32
	sectorsPerCluster, fats                      uint32
	totalSectors, fatSize                        uint64
	fat32                                        bool
	rootCluster                                  uint32
}

func probeVFAT(s *source) []Signature {
	b := s.read(0, 512)
	if b == nil {
		return nil
	}
	bpb, ok := readBPB(b)
	if !ok {
		return nil
	}
	ebr := b[36:] // FAT12/16 extended boot record
	if bpb.fat32 {
		ebr = b[64:]
	}
	sig := Signature{Type: TypeVFAT, Kind: KindFilesystem, Version: bpb.version()}
	// Extended boot signature 0x29 means the volume ID, label and type fields follow; 0x28 only the ID.
	if ebr[2] == 0x29 || ebr[2] == 0x28 {
		id := le.Uint32(ebr[3:])
		sig.UUID = fmt.Sprintf("%04X-%04X", id>>16, id&0xffff)
	}
	if ebr[2] == 0x29 {
		sig.Label = fatLabel(ebr[7:18])
	}
	if l, found := rootDirLabel(s, bpb); found {
		sig.Label = l
	}
	return []Signature{sig}
}

func readBPB(b []byte) (fatBPB, bool) {
	if b[0] != 0xeb && b[0] != 0xe9 {
		return fatBPB{}, false
	}
	p := fatBPB{
		bytesPerSector:    uint32(le.Uint16(b[11:])),
		sectorsPerCluster: uint32(b[13]),
		reservedSectors:   uint32(le.Uint16(b[14:])),
		fats:              uint32(b[16]),
		rootEntries:       uint32(le.Uint16(b[17:])),
		totalSectors:      uint64(le.Uint16(b[19:])),
		fatSize:           uint64(le.Uint16(b[22:])),
	}
	media := b[21]
	if p.totalSectors == 0 {
		p.totalSectors = uint64(le.Uint32(b[32:]))
	}
	if p.fatSize == 0 {
		p.fat32 = true
		p.fatSize = uint64(le.Uint32(b[36:]))
		p.rootCluster = le.Uint32(b[44:])
	}
	ok := isPowerOfTwo(uint64(p.bytesPerSector)) && p.bytesPerSector >= 512 && p.bytesPerSector <= 4096 &&
		isPowerOfTwo(uint64(p.sectorsPerCluster)) && p.reservedSectors > 0 && (p.fats == 1 || p.fats == 2) &&
		(media == 0xf0 || media >= 0xf8) && p.totalSectors > 0 && p.fatSize > 0
	return p, ok
}

func (p fatBPB) rootDirSectors() uint64 {
	return (uint64(p.rootEntries)*32 + uint64(p.bytesPerSector) - 1) / uint64(p.bytesPerSector)
}

// version tells FAT12, FAT16 and FAT32 apart by cluster count, the way the specification says to.
func (p fatBPB) version() string {
	meta := uint64(p.reservedSectors) + uint64(p.fats)*p.fatSize + p.rootDirSectors()
	if p.totalSectors <= meta {
		return "FAT"
	}
	clusters := (p.totalSectors - meta) / uint64(p.sectorsPerCluster)
	switch {
	case clusters < 4085:
		return "FAT12"
	case clusters < 65525:
		return "FAT16"
	default:
		return "FAT32"
	}
}

// rootDirLabel looks for the volume-label entry in the root directory (for FAT32, its first cluster).
func rootDirLabel(s *source, p fatBPB) (string, bool) {
	bps := uint64(p.bytesPerSector)
	start := (uint64(p.reservedSectors) + uint64(p.fats)*p.fatSize) * bps
	length := uint64(p.rootEntries) * 32
	if p.fat32 {
		if p.rootCluster < 2 {
			return "", false
		}
		start += uint64(p.rootCluster-2) * uint64(p.sectorsPerCluster) * bps
		length = uint64(p.sectorsPerCluster) * bps
	}
	length = min(length, fatMaxRootRead)
	if start >= uint64(s.size) || length == 0 {
		return "", false
	}
	dir := s.read(int64(start), int(min(length, uint64(s.size)-start)))
	for i := 0; i+32 <= len(dir); i += 32 {
		e := dir[i : i+32]
		switch {
		case e[0] == 0:
			return "", false // end of directory
		case e[0] == 0xe5 || e[11] == fatAttrLFN:
			continue // deleted entry or long-name fragment
		case e[11]&fatAttrVolumeID != 0:
			return fatLabel(e[0:11]), true
		}
	}
	return "", false
}

func fatLabel(b []byte) string {
	l := text(b)
	if l == fatNoName {
		return ""
	}
	return l
}
