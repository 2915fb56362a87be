package probe

// LVM2 physical volume: a label header "LABELONE" in one of the first four 512-byte sectors, with the type
// "LVM2 001" at 24 and, at the offset stored at 20, the PV header whose first 32 bytes are the PV UUID
// (printed by LVM in 6-4-4-4-4-4-6 groups).

func probeLVM2(s *source) []Signature {
	for sector := range int64(4) {
		off := sector * 512
		b := s.read(off, 512)
		if b == nil {
			return nil
		}
		if string(b[0:8]) != "LABELONE" || string(b[24:32]) != "LVM2 001" {
			continue
		}
		sig := Signature{Type: TypeLVM2, Kind: KindLVM, Offset: off, Version: "2"}
		if pvh := le.Uint32(b[20:]); pvh <= 512-32 {
			sig.UUID = lvmUUID(text(b[pvh : pvh+32]))
		}
		return []Signature{sig}
	}
	return nil
}

func lvmUUID(u string) string {
	if len(u) != 32 {
		return u
	}
	groups := []int{6, 4, 4, 4, 4, 4, 6}
	out, i := "", 0
	for n, g := range groups {
		if n > 0 {
			out += "-"
		}
		out += u[i : i+g]
		i += g
	}
	return out
}
