// Package payload is the contract between the image builder and machined about the Kubernetes payload:
// the read-only tree (a squashfs image on a node, a directory in sandbox mode) that holds everything a
// node runs besides its boot part.
//
//	bin/                        containerd, containerd-shim-runc-v2, runc: run on the node itself
//	cni/                        the CNI plugins
//	images/index.json           every image the node carries: name, manifest, config, layers (Index)
//	images/blobs/sha256/HEX     the images' manifests and configs
//	images/layers/HEX/          each layer unpacked once, named after its diff ID
//
// The layers are already unpacked, so a node never imports or decompresses an image at boot: machined
// registers each image with containerd and points its snapshots at these directories.
//
// The payload travels beside the boot part, never inside it, so the kernel unpacks only what the first
// seconds need (see Medium). The boot part records the payload's dm-verity root hash (SumFile in the root
// image, a Record for each packing of the tree: compressed, and uncompressed for the raw disk's slot);
// machined mounts the payload through dm-verity, so every block it reads is checked
// against that root (verity.go).
//
// Medium: where a node finds its payload, in the order machined looks.
//
//   - the raw disk: a GPT partition named PartitionLabel(slot) holding the squashfs from its first byte
//     (slot A; slot B is the upgrade's);
//   - vmlinux mode: a whole disk holding the squashfs (QEMU: payload.squashfs attached read-only);
//   - the ISO: the file ISOFile on the ISO 9660 filesystem labelled CAIRN (a CD, or the ISO written to a
//     USB stick), or ISOStream, unpacked onto the node's EPHEMERAL volume first.
package payload

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Paths inside the payload.
const (
	BinDir    = "bin"
	CNIDir    = "cni"
	ImagesDir = "images"
	IndexFile = "images/index.json"
	BlobsDir  = "images/blobs/sha256"
	LayersDir = "images/layers"
)

// On a node: where the root image records what the payload must be (Records), where the ISO carries the
// payload image, and where machined mounts it.
const (
	SumFile    = "/usr/share/cairn/payload.sha256"
	ISOFile    = "payload.squashfs"
	MountPoint = "/usr/lib/cairn/payload"
)

// The ISO's payload as one stream. An ISO whose build packed the uncompressed image (every `make image`)
// carries that image as a single zstd frame (ISOStream) instead of the compressed image (ISOFile): the
// squashfs compresses each 1 MiB block alone, so the Go binaries' common code (the runtime, gRPC,
// protobuf, the Kubernetes client libraries) is stored once per binary, while one stream whose window
// reaches across the image stores it once. The stream holds the image's data and its dm-verity superblock
// (StreamSize bytes), not the tree: 1.9 MB of hashes that do not compress, which a node rebuilds
// (FormatArgs, with the superblock's salt and UUID, ReadSalt) to the same bytes.
//
// A node cannot mount a stream: it unpacks it onto its EPHEMERAL volume (UnpackDir) when Init, Join or the
// start first mounts the payload, rebuilds the tree, keeps the copy across boots, and checks it against the
// recorded root hash like any other image. The frame's header records the unpacked size, which says which
// Record the stream claims to be before a byte is unpacked.
const (
	ISOStream = "payload.squashfs.zst"
	// StreamWindowLog is the widest window a node accepts in the stream, 2^28 bytes (the builder packs it
	// with 2^27): unpacking keeps that much memory, in a process of its own (UnpackHelper).
	StreamWindowLog = 28
	// UnpackDir is where a node booted from the ISO keeps the payload unpacked, as UnpackedFile.
	UnpackDir    = "/var/lib/cairn/payload"
	UnpackedFile = "payload.squashfs"
	// UnpackHelper is machined under another name (a link in the root image) that unpacks a stream into a
	// file: the decoder's window is then no part of PID 1's heap.
	UnpackHelper = "/usr/libexec/cairn/unpack-payload"
)

// StreamSize is how many bytes of the image r records the ISO's stream holds: the data and the dm-verity
// superblock.
func StreamSize(r Record) int64 { return r.Verity.DataSize + VerityBlock }

// Slots of the raw disk's payload partitions: the image ships in A; B receives an upgrade.
const (
	SlotA = "A"
	SlotB = "B"
)

// PartitionLabel is the GPT partition name of a slot's payload.
func PartitionLabel(slot string) string { return "CAIRN-PAYLOAD-" + slot }

// Sum is what the payload image must be: its SHA-256 and its length in bytes. The length says how much of
// a partition (which is larger than the image) the hash covers.
type Sum struct {
	SHA256 string `json:"sha256"` // 64 hex digits
	Size   int64  `json:"size"`
}

// String is "HEX SIZE", the first half of a Record.
func (s Sum) String() string { return fmt.Sprintf("%s %d", s.SHA256, s.Size) }

// ParseSum reads "HEX SIZE".
func ParseSum(text string) (Sum, error) {
	f := strings.Fields(text)
	if len(f) != 2 {
		return Sum{}, fmt.Errorf("payload sum %q: want \"SHA256 SIZE\"", strings.TrimSpace(text))
	}
	if _, err := Hex("sha256:" + f[0]); err != nil {
		return Sum{}, fmt.Errorf("payload sum: %w", err)
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n <= 0 {
		return Sum{}, fmt.Errorf("payload sum: size %q is not a positive number of bytes", f[1])
	}
	return Sum{SHA256: f[0], Size: n}, nil
}

// Index lists the payload's images.
type Index struct {
	Images []Image `json:"images"`
}

// Image is one image: its name, its manifest (the descriptor containerd's image record points at), its
// config, and its layers' diff IDs bottom-up (each one's directory is LayersDir/HEX).
type Image struct {
	Name     string     `json:"name"`
	Manifest Descriptor `json:"manifest"`
	Config   Descriptor `json:"config"`
	Layers   []string   `json:"layers"`
}

// Descriptor is an OCI content descriptor: media type, digest (sha256:HEX) and size.
type Descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// Hex is the hex part of a sha256:HEX digest, which names blobs and layer directories.
func Hex(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", fmt.Errorf("digest %q is not sha256:<64 hex digits>", digest)
	}
	return h, nil
}

// ReadIndex reads root's image index and checks every digest in it.
func ReadIndex(root string) (*Index, error) {
	b, err := os.ReadFile(filepath.Join(root, IndexFile))
	if err != nil {
		return nil, fmt.Errorf("payload image index: %w", err)
	}
	var ix Index
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("payload image index %s: %w", filepath.Join(root, IndexFile), err)
	}
	for _, img := range ix.Images {
		digests := append([]string{img.Manifest.Digest, img.Config.Digest}, img.Layers...)
		for _, d := range digests {
			if _, err := Hex(d); err != nil {
				return nil, fmt.Errorf("payload image %s: %w", img.Name, err)
			}
		}
	}
	return &ix, nil
}

// Names are the images' names.
func (ix *Index) Names() []string {
	out := make([]string, len(ix.Images))
	for i, img := range ix.Images {
		out[i] = img.Name
	}
	return out
}
