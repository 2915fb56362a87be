package probe

import "fmt"

// squashfs: magic "hsqs" (little-endian; "sqsh" for the old big-endian images) at byte 0, version major and
// minor as 16-bit numbers at 28 and 30. It has neither label nor UUID.

func probeSquashfs(s *source) []Signature {
	b := s.read(0, 32)
	if b == nil {
		return nil
	}
	var major, minor uint16
	switch string(b[0:4]) {
	case "hsqs":
		major, minor = le.Uint16(b[28:]), le.Uint16(b[30:])
	case "sqsh":
		major, minor = be.Uint16(b[28:]), be.Uint16(b[30:])
	default:
		return nil
	}
	return []Signature{{Type: TypeSquashfs, Kind: KindFilesystem, Version: fmt.Sprintf("%d.%d", major, minor)}}
}
