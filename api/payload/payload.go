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
// The boot part records the payload's SHA-256 (SumFile in the root image); machined checks the payload
// against it before mounting it.
package payload

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// On a node: where the root image says what the payload's SHA-256 must be, where the initramfs leaves
// the payload image, and where machined mounts it.
const (
	SumFile    = "/usr/share/cairn/payload.sha256"
	ImageFile  = "/payload.squashfs"
	MountPoint = "/usr/lib/cairn/payload"
)

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
