package probe

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
)

// strictReader panics on any read outside [0, size), so the fuzzer reports it as a crash.
type strictReader struct {
	data []byte
	size int64
}

func (r strictReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > r.size {
		panic(fmt.Sprintf("out-of-range read: %d bytes at %d on a %d-byte device", len(p), off, r.size))
	}
	return copy(p, r.data[off:]), nil
}

// FuzzProbe: any bytes, any (smaller) device size: no panic, no read outside the device.
func FuzzProbe(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed, uint32(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint32) {
		size := int64(len(data)) - int64(cut)%int64(len(data)+1)
		sigs, err := Probe(strictReader{data: data, size: size}, size)
		if err != nil {
			t.Fatalf("Probe error on in-memory data: %v", err)
		}
		_ = Describe(sigs)
	})
}

// fuzzSeeds are small headers of each format, enough for the fuzzer to reach the code past each magic.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	img := func(size int, writes ...func(b []byte)) []byte {
		b := make([]byte, size)
		for _, w := range writes {
			w(b)
		}
		seeds = append(seeds, b)
		return b
	}
	put := func(off int, s string) func([]byte) { return func(b []byte) { copy(b[off:], s) } }
	le16 := func(off int, v uint16) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint16(b[off:], v) }
	}
	le32 := func(off int, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[off:], v) }
	}
	be32 := func(off int, v uint32) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint32(b[off:], v) } }

	img(4096, put(0, "XFSB"), be32(4, 4096), func(b []byte) { binary.BigEndian.PutUint16(b[102:], 512) }, be32(88, 4), put(108, "label"))
	img(4096, le16(1024+0x38, 0xef53), le32(1024+0x60, 0x40), put(1024+0x78, "ext"))
	img(8192, put(0, "\xeb\x3c\x90"), le16(11, 512), func(b []byte) { b[13] = 4; b[16] = 2; b[21] = 0xf8 },
		le16(14, 1), le16(17, 16), le16(19, 8192/512), le16(22, 1), func(b []byte) { b[38] = 0x29 }, put(43, "FATLABEL   "),
		put(512*3, "ROOTLABEL  "), func(b []byte) { b[512*3+11] = 0x08 })
	img(70000, put(65536+64, "_BHRfS_M"), put(65536+0x12b, "btrfs"))
	img(8192, put(4096-10, "SWAPSPACE2"), le32(1024, 1), put(1052, "swaplabel"))
	img(8192, put(0, "LUKS\xba\xbe\x00\x02"), put(24, "luks2"), put(168, testUUID))
	img(20000, put(0x4000, "SKUL\xba\xbe\x00\x02"))
	img(2048, put(512, "LABELONE"), le32(512+20, 32), put(512+24, "LVM2 001"), put(512+32, "0123456789abcdef0123456789abcdef"))
	img(8192, le32(4096, mdMagic), le32(4100, 1), put(4096+32, "host:0"))
	img(256<<10, le32(192<<10, mdMagic))
	img(40000, func(b []byte) { b[32768] = 1 }, put(32769, "CD001"), put(32768+40, "ISO"), put(32768+813, "2024010203040500"))
	img(64, put(0, "hsqs"), le16(28, 4))
	img(512, func(b []byte) { b[446] = 0x80; b[446+4] = 0x05; b[510], b[511] = 0x55, 0xaa }, le32(446+8, 0))
	seeds = append(seeds, gptSeed())
	return seeds
}

// gptSeed is a valid GPT with one partition on a 64 KiB device, checksums included.
func gptSeed() []byte {
	const ss = 512
	b := make([]byte, 128*ss)
	le := binary.LittleEndian
	b[510], b[511] = 0x55, 0xaa
	b[446+4] = 0xee
	entries := b[2*ss : 2*ss+128*128]
	copy(entries[0:16], "0123456789abcdef")
	copy(entries[16:32], "fedcba9876543210")
	le.PutUint64(entries[32:], 34)
	le.PutUint64(entries[40:], 100)
	copy(entries[56:], "c\x00a\x00i\x00r\x00n\x00")
	h := b[ss : ss+92]
	copy(h, "EFI PART")
	le.PutUint32(h[8:], 0x00010000)
	le.PutUint32(h[12:], 92)
	le.PutUint64(h[24:], 1)
	le.PutUint64(h[32:], 127)
	le.PutUint64(h[72:], 2)
	le.PutUint32(h[80:], 128)
	le.PutUint32(h[84:], 128)
	le.PutUint32(h[88:], crc32.ChecksumIEEE(entries))
	le.PutUint32(h[16:], crc32.ChecksumIEEE(h))
	return b
}

// TestFuzzSeedsRecognised keeps the seeds honest: each must be recognised as something.
func TestFuzzSeedsRecognised(t *testing.T) {
	for i, seed := range fuzzSeeds() {
		sigs, err := Probe(strictReader{data: seed, size: int64(len(seed))}, int64(len(seed)))
		if err != nil || len(sigs) == 0 || sigs[0].Type == TypeUnknown {
			t.Errorf("Probe(seed %d) = %v, %v; want a known signature", i, sigs, err)
		}
	}
}
