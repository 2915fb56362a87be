package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

const (
	xzFilterX86   = 0x04
	xzFilterLZMA2 = 0x21
)

var xzMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}

// decompressXZ decodes the first block of an xz stream whose filter chain is [x86 BCJ?, LZMA2], the
// shape the kernel build produces. It reads the container by hand because ulikunitz/xz rejects any
// filter but LZMA2; integrity is left to the ELF checks on the result.
func decompressXZ(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, xzMagic) || len(data) < 13 {
		return nil, errors.New("not an xz stream")
	}
	blk := data[12:]
	hdrSize := (int(blk[0]) + 1) * 4
	if blk[0] == 0 || len(blk) < hdrSize {
		return nil, errors.New("xz stream has no block")
	}
	hdr := bytes.NewReader(blk[1 : hdrSize-4]) // without the size byte and the header CRC32
	flags, _ := hdr.ReadByte()
	if flags&0x40 != 0 {
		if _, err := readVarint(hdr); err != nil {
			return nil, fmt.Errorf("xz block compressed size: %w", err)
		}
	}
	if flags&0x80 != 0 {
		if _, err := readVarint(hdr); err != nil {
			return nil, fmt.Errorf("xz block uncompressed size: %w", err)
		}
	}
	var bcj bool
	var bcjStart uint32
	dictCap := -1
	for i := 0; i <= int(flags&0x03); i++ {
		id, err := readVarint(hdr)
		if err != nil {
			return nil, fmt.Errorf("xz filter %d id: %w", i, err)
		}
		n, err := readVarint(hdr)
		if err != nil || n > 4 {
			return nil, fmt.Errorf("xz filter %d properties size: bad value", i)
		}
		props := make([]byte, n)
		if _, err := io.ReadFull(hdr, props); err != nil {
			return nil, fmt.Errorf("xz filter %d properties: %w", i, err)
		}
		switch {
		case id == xzFilterX86 && (n == 0 || n == 4):
			bcj = true
			if n == 4 {
				bcjStart = uint32(props[0]) | uint32(props[1])<<8 | uint32(props[2])<<16 | uint32(props[3])<<24
			}
		case id == xzFilterLZMA2 && n == 1:
			dictCap = lzma2DictCap(props[0])
		default:
			return nil, fmt.Errorf("xz filter id %#x is not supported", id)
		}
	}
	if dictCap < 0 {
		return nil, errors.New("xz block has no LZMA2 filter")
	}
	r, err := lzma.Reader2Config{DictCap: dictCap}.NewReader2(bufio.NewReader(bytes.NewReader(blk[hdrSize:])))
	if err != nil {
		return nil, fmt.Errorf("lzma2 reader: %w", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("lzma2 data: %w", err)
	}
	if bcj {
		unBCJx86(out, bcjStart)
	}
	return out, nil
}

// lzma2DictCap decodes the one-byte LZMA2 dictionary size property.
func lzma2DictCap(b byte) int {
	if b >= 40 {
		return 1<<32 - 1
	}
	return (2 | int(b&1)) << (b/2 + 11)
}

func readVarint(r io.ByteReader) (uint64, error) {
	var v uint64
	for i := 0; i < 9; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7F) << (7 * i)
		if b&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("varint too long")
}
