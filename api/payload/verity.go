package payload

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The payload image carries its own dm-verity hash tree, so that a node checks every block it reads
// against one root hash instead of hashing the whole image before it mounts it:
//
//	0          the squashfs image, padded to 4 KiB (Verity.DataSize bytes)
//	DataSize   veritysetup's superblock (one 4 KiB block: salt, block sizes, number of data blocks)
//	+4 KiB     the hash tree, its top level first (one block, whose hash is the root hash)
//
// This is `veritysetup format IMAGE IMAGE --hash-offset=DataSize`'s layout with the default parameters
// (format 1, SHA-256, 4 KiB data and hash blocks), which the kernel's dm-verity reads.
const (
	// VerityBlock is the data and hash block size.
	VerityBlock = 4096
	// verityMagic opens veritysetup's superblock.
	verityMagic = "verity\x00\x00"
)

// Verity is what a node needs to open the payload through dm-verity: the root hash of its tree, and
// where the tree begins.
type Verity struct {
	RootHash string // 64 hex digits
	DataSize int64  // the squashfs image's size, a multiple of VerityBlock; the hash area starts here
}

// Record is what the root image records for the payload (SumFile): the whole image file's SHA-256 and
// size, which a copy of it (an install, an upgrade's slot) is checked against, and its dm-verity root,
// which every block a node reads from it is checked against.
type Record struct {
	Sum
	Verity Verity
}

// String is SumFile's content: "SHA256 SIZE ROOTHASH DATASIZE".
func (r Record) String() string {
	return fmt.Sprintf("%s %s %d", r.Sum, r.Verity.RootHash, r.Verity.DataSize)
}

// ParseRecord reads SumFile's content.
func ParseRecord(text string) (Record, error) {
	f := strings.Fields(text)
	if len(f) != 4 {
		return Record{}, fmt.Errorf("payload record %q: want \"SHA256 SIZE ROOTHASH DATASIZE\"", strings.TrimSpace(text))
	}
	sum, err := ParseSum(f[0] + " " + f[1])
	if err != nil {
		return Record{}, err
	}
	if _, err := Hex("sha256:" + f[2]); err != nil {
		return Record{}, fmt.Errorf("payload record: dm-verity root hash: %w", err)
	}
	n, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || n <= 0 || n%VerityBlock != 0 || n >= sum.Size {
		return Record{}, fmt.Errorf("payload record: data size %q is not a positive multiple of %d below the image's %d bytes", f[3], VerityBlock, sum.Size)
	}
	return Record{Sum: sum, Verity: Verity{RootHash: f[2], DataSize: n}}, nil
}

// Records is SumFile's content: one Record per encoding of the same tree, one per line, the one the ISO
// carries first. A build packs its payload twice: compressed, for the media that carry it as it is
// mounted (the ISO, the upgrade bundle, the cloud disk), and uncompressed for the raw disk, whose
// download is compressed whole and so shares the binaries' common code across the payload. A node mounts
// whichever of them its medium holds.
type Records []Record

// String is SumFile's content, one Record a line.
func (rs Records) String() string {
	lines := make([]string, len(rs))
	for i, r := range rs {
		lines[i] = r.String()
	}
	return strings.Join(lines, "\n")
}

// Find returns the record whose dm-verity tree is v.
func (rs Records) Find(v Verity) (Record, bool) {
	for _, r := range rs {
		if r.Verity == v {
			return r, true
		}
	}
	return Record{}, false
}

// ParseRecords reads SumFile's content: one Record a line, at least one.
func ParseRecords(text string) (Records, error) {
	var rs Records
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		r, err := ParseRecord(line)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("payload record: empty, want one \"SHA256 SIZE ROOTHASH DATASIZE\" a line")
	}
	return rs, nil
}

// ReadVerity reads an image laid out as above and computes its root hash from the tree it carries:
// the hash of the tree's top block, salted as the superblock says. It reads three blocks, not the image;
// whether the tree matches the data is what dm-verity checks as the node reads it.
func ReadVerity(r io.ReaderAt) (Verity, error) {
	sb := make([]byte, 48)
	if _, err := r.ReadAt(sb, 0); err != nil {
		return Verity{}, fmt.Errorf("read the squashfs superblock: %w", err)
	}
	if string(sb[:4]) != "hsqs" {
		return Verity{}, fmt.Errorf("no squashfs image at its start")
	}
	// bytes_used (offset 40); mksquashfs pads the image to 4 KiB, and the tree begins after the padding.
	data := int64(binary.LittleEndian.Uint64(sb[40:])+VerityBlock-1) &^ (VerityBlock - 1)
	vsb, salt, err := readSuperblock(r, data)
	if err != nil {
		return Verity{}, fmt.Errorf("%w, after the squashfs image", err)
	}
	if blocks := binary.LittleEndian.Uint64(vsb[72:]); int64(blocks)*VerityBlock != data {
		return Verity{}, fmt.Errorf("dm-verity superblock covers %d blocks, the squashfs image is %d", blocks, data/VerityBlock)
	}
	// The tree has as many levels as it takes to end in one block, its top, right after the superblock;
	// an image of a single block has none, and the root is that block's own hash.
	top, at := make([]byte, VerityBlock), data+VerityBlock
	if data == VerityBlock {
		at = 0
	}
	if _, err := r.ReadAt(top, at); err != nil {
		return Verity{}, fmt.Errorf("read the top of the dm-verity tree at byte %d: %w", at, err)
	}
	h := sha256.New()
	h.Write(salt)
	h.Write(top)
	return Verity{RootHash: hex.EncodeToString(h.Sum(nil)), DataSize: data}, nil
}

// FormatArgs are veritysetup's arguments that append an image's dm-verity superblock and tree (the layout
// above) to the image file itself, after its first dataSize bytes, with the given salt (hex) and UUID:
// the builder's, and a node's that rebuilds the tree of the ISO's stream, which carries the data and the
// superblock only (ISOStream). The same data, salt and UUID always give the same tree, byte for byte.
func FormatArgs(image string, dataSize int64, salt, uuid string) []string {
	return []string{"format", image, image,
		"--hash-offset=" + strconv.FormatInt(dataSize, 10), "--data-blocks=" + strconv.FormatInt(dataSize/VerityBlock, 10),
		"--data-block-size=4096", "--hash-block-size=4096", "--hash=sha256", "--format=1",
		"--salt=" + salt, "--uuid=" + uuid}
}

// ReadSalt reads the salt (hex) and the UUID of the dm-verity superblock at byte dataSize of r, as
// FormatArgs takes them.
func ReadSalt(r io.ReaderAt, dataSize int64) (salt, uuid string, err error) {
	vsb, s, err := readSuperblock(r, dataSize)
	if err != nil {
		return "", "", err
	}
	u := vsb[16:32]
	return hex.EncodeToString(s), fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// readSuperblock reads the dm-verity superblock at byte at of r, checks it describes the layout above
// (format 1, SHA-256, 4 KiB blocks), and returns it with its salt.
func readSuperblock(r io.ReaderAt, at int64) (vsb, salt []byte, err error) {
	vsb = make([]byte, VerityBlock)
	if _, err := r.ReadAt(vsb, at); err != nil {
		return nil, nil, fmt.Errorf("read the dm-verity superblock at byte %d: %w", at, err)
	}
	if string(vsb[:8]) != verityMagic {
		return nil, nil, fmt.Errorf("no dm-verity superblock at byte %d", at)
	}
	le := binary.LittleEndian
	version, hashType := le.Uint32(vsb[8:]), le.Uint32(vsb[12:])
	alg := string(bytes.TrimRight(vsb[32:64], "\x00"))
	dataBlock, hashBlock := le.Uint32(vsb[64:]), le.Uint32(vsb[68:])
	saltSize := int(le.Uint16(vsb[80:]))
	if version != 1 || hashType != 1 || alg != "sha256" || dataBlock != VerityBlock || hashBlock != VerityBlock || saltSize > 256 {
		return nil, nil, fmt.Errorf("dm-verity superblock: version %d, type %d, %s, blocks %d/%d, salt %d bytes: want 1, 1, sha256, %d/%d",
			version, hashType, alg, dataBlock, hashBlock, saltSize, VerityBlock, VerityBlock)
	}
	return vsb, vsb[88 : 88+saltSize], nil
}
