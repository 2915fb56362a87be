package probe

// ext2/3/4 share one superblock, 1024 bytes into the device, little-endian, magic 0xEF53 at 0x38. Which of
// the three it is follows from the feature flags: a journal makes ext3, any feature ext3 does not know makes
// ext4, and an external journal device (JOURNAL_DEV) is "jbd".

const (
	extSuperblock = 1024

	extCompatHasJournal = 0x4

	extIncompatFiletype   = 0x2
	extIncompatRecover    = 0x4
	extIncompatJournalDev = 0x8
	extIncompatMetaBG     = 0x10

	extROCompatSparseSuper = 0x1
	extROCompatLargeFile   = 0x2
	extROCompatBtreeDir    = 0x4

	// What ext3 understands; anything else needs ext4.
	ext3Incompat = extIncompatFiletype | extIncompatRecover | extIncompatMetaBG
	ext3ROCompat = extROCompatSparseSuper | extROCompatLargeFile | extROCompatBtreeDir
)

func probeExt(s *source) []Signature {
	b := s.read(extSuperblock, 1024)
	if b == nil || le.Uint16(b[0x38:]) != 0xef53 {
		return nil
	}
	compat, incompat, roCompat := le.Uint32(b[0x5c:]), le.Uint32(b[0x60:]), le.Uint32(b[0x64:])
	sig := Signature{Kind: KindFilesystem, Offset: extSuperblock, UUID: uuid(b[0x68:0x78]), Label: text(b[0x78:0x88])}
	switch {
	case incompat&extIncompatJournalDev != 0:
		sig.Type = TypeJBD
	case incompat&^ext3Incompat != 0 || roCompat&^ext3ROCompat != 0:
		sig.Type = TypeExt4
	case compat&extCompatHasJournal != 0:
		sig.Type = TypeExt3
	default:
		sig.Type = TypeExt2
	}
	// s_log_block_size: block size is 1024 << n, at most 64 KiB.
	if le.Uint32(b[0x18:]) > 6 {
		sig.Problem = "ext superblock has an impossible block size"
	}
	return []Signature{sig}
}
