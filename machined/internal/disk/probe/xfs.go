package probe

// XFS: the primary superblock is at byte 0 of the device, big-endian, magic "XFSB". The label (sb_fname) is
// 12 bytes at 108 and the filesystem UUID (sb_uuid) 16 bytes at 32.

func probeXFS(s *source) []Signature {
	b := s.read(0, 512)
	if b == nil || string(b[0:4]) != "XFSB" {
		return nil
	}
	blockSize := uint64(be.Uint32(b[4:]))
	sectSize := uint64(be.Uint16(b[102:]))
	agCount := be.Uint32(b[88:])
	sig := Signature{Type: TypeXFS, Kind: KindFilesystem, Label: text(b[108:120]), UUID: uuid(b[32:48])}
	if !isPowerOfTwo(blockSize) || blockSize < 512 || blockSize > 65536 ||
		!isPowerOfTwo(sectSize) || sectSize < 512 || sectSize > 32768 || agCount == 0 {
		sig.Problem = "xfs superblock has impossible geometry"
	}
	return []Signature{sig}
}
