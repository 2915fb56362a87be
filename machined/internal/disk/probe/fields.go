package probe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf16"
)

// Small decoders for header fields. Callers slice the header they read; the read itself is what is
// bounds-checked against the device, and each decoder is only called on offsets inside that header.

var (
	le = binary.LittleEndian
	be = binary.BigEndian
)

// text decodes a fixed-size, NUL- or space-padded ASCII/UTF-8 field.
func text(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimRight(string(b), " ")
}

// utf16Text decodes a little-endian UTF-16 field that ends at the first NUL.
func utf16Text(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := le.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

// uuid formats 16 bytes in the usual 8-4-4-4-12 form, bytes in on-disk order; empty if all zero.
func uuid(b []byte) string {
	if len(b) != 16 || allZero(b) {
		return ""
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// guid formats a GPT GUID, whose first three fields are little-endian on disk.
func guid(b []byte) string {
	if len(b) != 16 {
		return ""
	}
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", le.Uint32(b[0:]), le.Uint16(b[4:]), le.Uint16(b[6:]), b[8:10], b[10:16])
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func isPowerOfTwo(v uint64) bool { return v != 0 && v&(v-1) == 0 }
