package kernel

// The kernel's xz payload is filtered with the x86 BCJ filter before LZMA2 (scripts/xz_wrap.sh passes
// --x86 on x86): the encoder rewrote the relative targets of CALL (E8) and JMP (E9) instructions into
// absolute ones so they compress better. ulikunitz/xz only knows LZMA2, so the inverse lives here.

// isX86Operand reports whether b may be the most significant byte of a near-branch operand: real
// targets within ±16 MiB have 0x00 or 0xFF there, which is how the filter tells code from data.
func isX86Operand(b byte) bool { return b == 0x00 || b == 0xFF }

// bcjMaskAllowed and bcjMaskBit are indexed by the 3-bit history of E8/E9 bytes seen in the previous
// three positions: whether a conversion may still happen, and which operand byte to inspect.
var (
	bcjMaskAllowed = [8]bool{true, true, true, false, true, false, false, false}
	bcjMaskBit     = [8]uint{0, 1, 2, 2, 3, 3, 3, 3}
)

// unBCJx86 decodes buf in place as one whole stream starting at offset start. The last four bytes can
// never start a full instruction and are left as they are, like the reference decoder does at the end
// of a stream.
func unBCJx86(buf []byte, start uint32) {
	if len(buf) < 5 {
		return
	}
	ip := start + 5
	var mask uint32
	last := -1 // position of the previous E8/E9 byte, -1 for none yet
	limit := len(buf) - 4
	for pos := 0; pos < limit; {
		if buf[pos]&0xFE != 0xE8 {
			pos++
			continue
		}
		gap := pos - last
		if last < 0 || gap > 3 {
			mask = 0
		} else {
			mask = (mask << uint(gap-1)) & 7
			if mask != 0 {
				b := buf[pos+4-int(bcjMaskBit[mask])]
				if !bcjMaskAllowed[mask] || isX86Operand(b) {
					last = pos
					mask = ((mask << 1) & 7) | 1
					pos++
					continue
				}
			}
		}
		last = pos
		if !isX86Operand(buf[pos+4]) {
			mask = ((mask << 1) & 7) | 1
			pos++
			continue
		}
		src := uint32(buf[pos+1]) | uint32(buf[pos+2])<<8 | uint32(buf[pos+3])<<16 | uint32(buf[pos+4])<<24
		var dest uint32
		for {
			dest = src - (ip + uint32(pos))
			if mask == 0 {
				break
			}
			shift := bcjMaskBit[mask] * 8
			if !isX86Operand(byte(dest >> (24 - shift))) {
				break
			}
			src = dest ^ (1<<(32-shift) - 1)
		}
		// Bit 24 decides the sign: the operand's top byte becomes 0x00 or 0xFF again.
		buf[pos+4] = ^byte((dest>>24)&1 - 1)
		buf[pos+3] = byte(dest >> 16)
		buf[pos+2] = byte(dest >> 8)
		buf[pos+1] = byte(dest)
		pos += 5
	}
}
