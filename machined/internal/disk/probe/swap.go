package probe

// Linux swap: the last 10 bytes of the first page hold "SWAPSPACE2" (or the old "SWAP-SPACE"); the page size
// is the one of the machine that ran mkswap, so every size Linux uses is tried. A v1 header has the UUID at
// 1036 and the label at 1052. A hibernation image replaces the magic with one of the suspend magics.

var swapPageSizes = []int64{4096, 8192, 16384, 32768, 65536}

var suspendMagics = []string{"S1SUSPEND", "S2SUSPEND", "ULSUSPEND", "LINHIB0001"}

func probeSwap(s *source) []Signature {
	for _, ps := range swapPageSizes {
		b := s.read(ps-10, 10)
		if b == nil {
			return nil
		}
		magic := string(b)
		switch {
		case magic == "SWAPSPACE2":
			sig := Signature{Type: TypeSwap, Kind: KindSwap, Version: "1"}
			if h := s.read(1024, 44); h != nil {
				sig.UUID, sig.Label = uuid(h[12:28]), text(h[28:44])
			}
			return []Signature{sig}
		case magic == "SWAP-SPACE":
			return []Signature{{Type: TypeSwap, Kind: KindSwap, Version: "0"}}
		}
		for _, m := range suspendMagics {
			if magic[:len(m)] == m {
				return []Signature{{Type: TypeSuspend, Kind: KindSwap, Version: m}}
			}
		}
	}
	return nil
}
