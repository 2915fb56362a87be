package probe

// btrfs: the superblock is at 64 KiB with mirrors at 64 MiB and 256 GiB; magic "_BHRfS_M" at byte 64 of it,
// fsid (the filesystem UUID) at 32 and the 256-byte label at 0x12b.

var btrfsSuperblocks = []int64{64 << 10, 64 << 20, 256 << 30}

func probeBtrfs(s *source) []Signature {
	for i, off := range btrfsSuperblocks {
		b := s.read(off, 0x12b+256)
		if b == nil || string(b[64:72]) != "_BHRfS_M" {
			continue
		}
		sig := Signature{Type: TypeBtrfs, Kind: KindFilesystem, Offset: off, UUID: uuid(b[32:48]), Label: text(b[0x12b:])}
		if i > 0 {
			sig.Problem = "only a mirror copy of the btrfs superblock remains"
		}
		return []Signature{sig}
	}
	return nil
}
