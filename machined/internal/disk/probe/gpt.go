package probe

import (
	"hash/crc32"
)

// GPT (UEFI specification, chapter 5): a header in LBA 1 and a copy in the last LBA, each pointing at an
// array of partition entries; both the header and the array carry a CRC32. The sector size is not
// recorded anywhere, so 512 and 4096 are tried.

const (
	gptSignature      = "EFI PART"
	gptMinHeaderSize  = 92
	gptMaxEntries     = 1024    // real tables have 128; this bounds what a corrupt header can ask for
	gptMaxEntryBytes  = 1 << 20 // and how much of the device an entry array may span
	gptMinEntrySize   = 128
	gptEntryNameBytes = 72
)

var gptSectorSizes = []int64{512, 4096}

type gptHeader struct {
	myLBA, altLBA, entriesLBA uint64
	entries, entrySize        uint32
	entriesCRC                uint32
	diskGUID                  string
}

func probeGPT(s *source) []Signature {
	var damaged *Signature
	for _, ss := range gptSectorSizes {
		primary := ss
		sig, found := gptAt(s, primary, ss)
		if found && sig.Problem == "" {
			return []Signature{sig}
		}
		if found && damaged == nil {
			damaged = &sig
		}
		if s.size/ss < 2 {
			continue
		}
		backup := (s.size/ss - 1) * ss
		bsig, bfound := gptAt(s, backup, ss)
		if bfound && bsig.Problem == "" {
			if found {
				bsig.Problem = "primary GPT header damaged (" + sig.Problem + "); the backup header at the end of the device is intact"
			} else {
				bsig.Problem = "primary GPT header missing; only the backup header at the end of the device remains"
			}
			return []Signature{bsig}
		}
		if bfound && damaged == nil {
			damaged = &bsig
		}
	}
	if damaged != nil {
		return []Signature{*damaged}
	}
	return nil
}

// gptAt reads a GPT header at off. found reports whether the signature was there at all; a found header that
// fails its checks comes back with Problem set.
func gptAt(s *source, off, sectorSize int64) (Signature, bool) {
	b := s.read(off, int(sectorSize))
	if b == nil || string(b[:8]) != gptSignature {
		return Signature{}, false
	}
	sig := Signature{Type: TypeGPT, Kind: KindPartitionTable, Offset: off}
	hdrSize := le.Uint32(b[12:])
	if hdrSize < gptMinHeaderSize || int64(hdrSize) > sectorSize {
		sig.Problem = "GPT header has an impossible size"
		return sig, true
	}
	hdr := make([]byte, hdrSize)
	copy(hdr, b)
	want := le.Uint32(hdr[16:])
	clear(hdr[16:20])
	if crc32.ChecksumIEEE(hdr) != want {
		sig.Problem = "GPT header checksum mismatch"
		return sig, true
	}
	h := gptHeader{
		myLBA:      le.Uint64(b[24:]),
		altLBA:     le.Uint64(b[32:]),
		diskGUID:   guid(b[56:72]),
		entriesLBA: le.Uint64(b[72:]),
		entries:    le.Uint32(b[80:]),
		entrySize:  le.Uint32(b[84:]),
		entriesCRC: le.Uint32(b[88:]),
	}
	sig.UUID = h.diskGUID
	if h.myLBA != uint64(off/sectorSize) {
		sig.Problem = "GPT header does not point at its own sector"
		return sig, true
	}
	if h.entries > gptMaxEntries || h.entrySize < gptMinEntrySize || !isPowerOfTwo(uint64(h.entrySize)) ||
		uint64(h.entries)*uint64(h.entrySize) > gptMaxEntryBytes || h.entriesLBA > uint64(s.size/sectorSize) {
		sig.Problem = "GPT partition entry array has an impossible size or place"
		return sig, true
	}
	arr := s.read(int64(h.entriesLBA)*sectorSize, int(h.entries*h.entrySize))
	if arr == nil {
		sig.Problem = "GPT partition entry array lies outside the device"
		return sig, true
	}
	if crc32.ChecksumIEEE(arr) != h.entriesCRC {
		sig.Problem = "GPT partition entry array checksum mismatch"
		return sig, true
	}
	for i := range int(h.entries) {
		e := arr[i*int(h.entrySize):][:h.entrySize]
		if allZero(e[0:16]) {
			continue // unused entry
		}
		first, last := le.Uint64(e[32:]), le.Uint64(e[40:])
		p := Partition{
			Number: i + 1,
			Type:   guid(e[0:16]),
			UUID:   guid(e[16:32]),
			Name:   utf16Text(e[56 : 56+gptEntryNameBytes]),
			// Bit 2 is "legacy BIOS bootable".
			Bootable: le.Uint64(e[48:])&(1<<2) != 0,
		}
		if last >= first && last < 1<<54 {
			p.Start = int64(first) * sectorSize
			p.Size = int64(last-first+1) * sectorSize
		}
		sig.Partitions = append(sig.Partitions, p)
	}
	return sig, true
}
