package probe

import "fmt"

// ISO9660 (ECMA-119): volume descriptors start at byte 32768, one per 2048-byte sector, each with a type byte
// and "CD001"; type 1 is the primary volume descriptor (volume identifier at 40, creation date at 813) and
// 255 ends the set. Like blkid, the UUID is the creation date, the only unique-ish value the format has.

const (
	isoFirstDescriptor = 32768
	isoSectorSize      = 2048
	isoMaxDescriptors  = 32
)

func probeISO9660(s *source) []Signature {
	for i := range isoMaxDescriptors {
		off := int64(isoFirstDescriptor + i*isoSectorSize)
		b := s.read(off, isoSectorSize)
		if b == nil || string(b[1:6]) != "CD001" {
			return nil
		}
		switch b[0] {
		case 1:
			return []Signature{{Type: TypeISO9660, Kind: KindFilesystem, Offset: isoFirstDescriptor,
				Label: text(b[40:72]), UUID: isoDate(b[813:830])}}
		case 255:
			// A terminator before any primary descriptor is still an ISO9660 volume set.
			return []Signature{{Type: TypeISO9660, Kind: KindFilesystem, Offset: isoFirstDescriptor,
				Problem: "no primary volume descriptor"}}
		}
	}
	return nil
}

// isoDate formats the 17-byte decimal date "YYYYMMDDhhmmsscc" + zone as YYYY-MM-DD-hh-mm-ss-cc.
func isoDate(b []byte) string {
	d := b[:16]
	for _, c := range d {
		if c < '0' || c > '9' {
			return ""
		}
	}
	if string(d) == "0000000000000000" {
		return ""
	}
	return fmt.Sprintf("%s-%s-%s-%s-%s-%s-%s", d[0:4], d[4:6], d[6:8], d[8:10], d[10:12], d[12:14], d[14:16])
}
