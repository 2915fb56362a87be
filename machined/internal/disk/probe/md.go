package probe

// Linux MD RAID superblocks, magic 0xa92b4efc (little-endian on every current platform):
//   - 0.90: in the last 64 KiB-aligned 64 KiB block of the device; UUID words at 20 and 52..64.
//   - 1.0: 8 KiB before the end, aligned down to 4 KiB; 1.1: at 0; 1.2: at 4 KiB.
//     Version 1 keeps the set UUID at 16 and the array name (hostname:N) at 32.

const mdMagic = 0xa92b4efc

func probeMD(s *source) []Signature {
	var out []Signature
	if s.size >= 128<<10 {
		off := (s.size &^ (64<<10 - 1)) - 64<<10
		if b := s.read(off, 64); b != nil && le.Uint32(b[0:]) == mdMagic && le.Uint32(b[4:]) == 0 {
			id := make([]byte, 0, 16)
			id = append(id, b[20:24]...)
			id = append(id, b[52:64]...)
			out = append(out, Signature{Type: TypeMD, Kind: KindRAID, Offset: off, Version: "0.90", UUID: uuid(id)})
		}
	}
	for _, v := range []struct {
		version string
		off     int64
	}{
		{"1.1", 0},
		{"1.2", 4096},
		{"1.0", ((s.size - 8192) &^ (4096 - 1))},
	} {
		if v.off < 0 || (v.version == "1.0" && v.off <= 4096) {
			continue // too small to hold a 1.0 superblock apart from the others
		}
		b := s.read(v.off, 64)
		if b == nil || le.Uint32(b[0:]) != mdMagic || le.Uint32(b[4:]) != 1 {
			continue
		}
		out = append(out, Signature{Type: TypeMD, Kind: KindRAID, Offset: v.off, Version: v.version,
			UUID: uuid(b[16:32]), Label: text(b[32:64])})
	}
	return out
}
