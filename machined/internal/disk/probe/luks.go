package probe

import "fmt"

// LUKS1 and LUKS2 start with "LUKS\xba\xbe" and a big-endian version. Both keep the UUID as 40 ASCII bytes at
// 168; LUKS2 adds a 48-byte label at 24. LUKS2 also writes a secondary header ("SKUL\xba\xbe") at one of a few
// fixed offsets, which survives when the primary has been wiped.

var (
	luksMagic          = "LUKS\xba\xbe"
	luksSecondaryMagic = "SKUL\xba\xbe"
	luks2Secondary     = []int64{0x4000, 0x8000, 0x10000, 0x20000, 0x40000, 0x80000, 0x100000, 0x200000, 0x400000}
)

func probeLUKS(s *source) []Signature {
	if sig, ok := luksAt(s, 0, luksMagic); ok {
		return []Signature{sig}
	}
	for _, off := range luks2Secondary {
		if sig, ok := luksAt(s, off, luksSecondaryMagic); ok {
			sig.Problem = "primary LUKS header missing; a secondary LUKS2 header remains"
			return []Signature{sig}
		}
	}
	return nil
}

func luksAt(s *source, off int64, magic string) (Signature, bool) {
	b := s.read(off, 208)
	if b == nil || string(b[0:6]) != magic {
		return Signature{}, false
	}
	v := be.Uint16(b[6:])
	sig := Signature{Type: TypeLUKS, Kind: KindCrypto, Offset: off, Version: fmt.Sprint(v), UUID: text(b[168:208])}
	switch v {
	case 1:
	case 2:
		sig.Label = text(b[24:72])
	default:
		sig.Problem = fmt.Sprintf("unknown LUKS version %d", v)
	}
	return sig, true
}
