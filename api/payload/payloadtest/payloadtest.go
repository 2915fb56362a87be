// Package payloadtest makes small files laid out as a payload image (api/payload's Verity layout) for
// tests: a squashfs superblock, dm-verity's superblock and a top hash block. Their tree is not a real
// one (dm-verity would refuse it); what reads only the superblocks and the top of the tree, as a node's
// search for its payload does, takes them for the real thing.
package payloadtest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/cairn-os/cairn/api/payload"
)

// Image returns an image of blocks data blocks (at least 1) whose content, and so whose root hash,
// differs with seed, and what a root image would record for it.
func Image(blocks int, seed string) ([]byte, payload.Record) {
	const bs = payload.VerityBlock
	data := int64(blocks) * bs
	// The superblock, the top of the tree, and a block standing for the tree's lower levels.
	b := make([]byte, data+3*bs)
	copy(b, "hsqs")
	binary.LittleEndian.PutUint64(b[40:], uint64(data-100)) // mksquashfs pads to 4 KiB
	copy(b[96:], seed)
	sb := b[data:]
	le := binary.LittleEndian
	copy(sb, "verity\x00\x00")
	le.PutUint32(sb[8:], 1)
	le.PutUint32(sb[12:], 1)
	copy(sb[32:], "sha256")
	le.PutUint32(sb[64:], bs)
	le.PutUint32(sb[68:], bs)
	le.PutUint64(sb[72:], uint64(blocks))
	salt := sha256.Sum256([]byte("salt " + seed))
	le.PutUint16(sb[80:], uint16(len(salt)))
	copy(sb[88:], salt[:])
	top := sha256.Sum256([]byte("tree " + seed))
	copy(b[data+bs:], top[:])
	root := sha256.New()
	root.Write(salt[:])
	root.Write(b[data+bs : data+2*bs])
	file := sha256.Sum256(b)
	return b, payload.Record{
		Sum:    payload.Sum{SHA256: hex.EncodeToString(file[:]), Size: int64(len(b))},
		Verity: payload.Verity{RootHash: hex.EncodeToString(root.Sum(nil)), DataSize: data},
	}
}
