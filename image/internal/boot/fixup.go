package boot

import (
	"encoding/binary"
	"errors"
	"os"
)

// The mformat that grub-mkrescue runs gives the ISO's embedded EFI FAT image a random volume serial,
// which no option fixes: it is patched afterwards with a value derived from the epoch.

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
