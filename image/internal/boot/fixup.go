package boot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// Two tools write a value of their own choosing that no option fixes: objcopy stamps the UKI's PE
// header with the build time, and the mformat that grub-mkrescue runs gives the ISO's embedded EFI
// FAT image a random volume serial. Both are patched afterwards with values derived from the epoch.

// setPETimestamp sets a PE image's TimeDateStamp and recomputes its checksum.
func setPETimestamp(path string, epoch int64) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return fmt.Errorf("%s: not a PE image", path)
	}
	pe := int(binary.LittleEndian.Uint32(b[0x3C:]))
	if pe+24+68 > len(b) || !bytes.Equal(b[pe:pe+4], []byte("PE\x00\x00")) {
		return fmt.Errorf("%s: no PE header", path)
	}
	binary.LittleEndian.PutUint32(b[pe+8:], uint32(epoch))
	sumAt := pe + 24 + 64 // CheckSum in the optional header (same place for PE32 and PE32+)
	binary.LittleEndian.PutUint32(b[sumAt:], 0)
	binary.LittleEndian.PutUint32(b[sumAt:], peChecksum(b))
	return os.WriteFile(path, b, 0o644)
}

// peChecksum is the image checksum of the PE format: a 16-bit ones'-complement-style sum of the
// file's words, with the carry folded back in, plus the file length. The CheckSum field must be 0.
func peChecksum(b []byte) uint32 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.LittleEndian.Uint16(b[i:]))
		sum = (sum & 0xFFFF) + (sum >> 16)
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1])
		sum = (sum & 0xFFFF) + (sum >> 16)
	}
	return (sum & 0xFFFF) + uint32(len(b))
}

// setFATSerials finds FAT12/16 boot sectors on 2 KiB boundaries of an ISO (where grub-mkrescue puts
// its EFI image) and sets their volume serial. It returns how many it patched.
func setFATSerials(path string, serial uint32) (int, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	sec := make([]byte, 512)
	n := 0
	for off := int64(0); off+512 <= fi.Size(); off += 2048 {
		if _, err := f.ReadAt(sec, off); err != nil {
			return n, err
		}
		if !isFAT1x(sec) {
			continue
		}
		var s [4]byte
		binary.LittleEndian.PutUint32(s[:], serial)
		if _, err := f.WriteAt(s[:], off+0x27); err != nil {
			return n, err
		}
		n++
	}
	if n == 0 {
		return 0, errors.New("no EFI FAT image found in the ISO")
	}
	return n, f.Close()
}

// isFAT1x recognises a FAT12/16 boot sector with the extended boot signature, where the serial is
// at 0x27.
func isFAT1x(s []byte) bool {
	if s[510] != 0x55 || s[511] != 0xAA || s[0x26] != 0x29 {
		return false
	}
	t := string(s[0x36:0x3E])
	return t == "FAT12   " || t == "FAT16   "
}
