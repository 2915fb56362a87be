package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotation keys on index.json entries. containerd names an imported image
// after io.containerd.image.name; other tools read the OCI one. Both carry
// the full reference, so either way the image gets the name manifests use.
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// Written is what WriteArchive stored for one image.
type Written struct {
	Name   string
	Digest v1.Hash // manifest digest: the one containerd reports after import
	Size   int64   // manifest, config and layers, counting shared layers fully
}

type blob struct {
	size int64
	open func() (io.ReadCloser, error)
}

// WriteArchive writes imgs as one OCI image layout in a tar stream, the form
// `ctr images import` and containerd's client.Import read. A blob used by
// several images (the shared kube layer) is written once. Entries are sorted
// and time-stamped with Epoch, so the same images give the same bytes.
func WriteArchive(w io.Writer, imgs []Named) ([]Written, error) {
	blobs := map[v1.Hash]blob{}
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	var written []Written
	for _, n := range imgs {
		manifest, err := n.Image.RawManifest()
		if err != nil {
			return nil, fmt.Errorf("image %s: manifest: %w", n.Name, err)
		}
		digest, err := n.Image.Digest()
		if err != nil {
			return nil, fmt.Errorf("image %s: digest: %w", n.Name, err)
		}
		config, err := n.Image.RawConfigFile()
		if err != nil {
			return nil, fmt.Errorf("image %s: config: %w", n.Name, err)
		}
		configName, err := n.Image.ConfigName()
		if err != nil {
			return nil, fmt.Errorf("image %s: config digest: %w", n.Name, err)
		}
		blobs[digest] = bytesBlob(manifest)
		blobs[configName] = bytesBlob(config)
		total := int64(len(manifest) + len(config))

		layers, err := n.Image.Layers()
		if err != nil {
			return nil, fmt.Errorf("image %s: layers: %w", n.Name, err)
		}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				return nil, fmt.Errorf("image %s: layer digest: %w", n.Name, err)
			}
			size, err := l.Size()
			if err != nil {
				return nil, fmt.Errorf("image %s: layer %s size: %w", n.Name, d, err)
			}
			blobs[d] = blob{size: size, open: l.Compressed}
			total += size
		}

		index.Manifests = append(index.Manifests, v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Digest:    digest,
			Size:      int64(len(manifest)),
			Platform:  &v1.Platform{Architecture: "amd64", OS: "linux"},
			Annotations: map[string]string{
				AnnotationContainerdName: n.Name,
				AnnotationRefName:        n.Name,
			},
		})
		written = append(written, Written{Name: n.Name, Digest: digest, Size: total})
	}
	sort.Slice(index.Manifests, func(i, j int) bool {
		return index.Manifests[i].Annotations[AnnotationContainerdName] < index.Manifests[j].Annotations[AnnotationContainerdName]
	})
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return nil, fmt.Errorf("encode index.json: %w", err)
	}

	tw := tar.NewWriter(w)
	if err := writeEntry(tw, "oci-layout", bytesBlob([]byte(`{"imageLayoutVersion":"1.0.0"}`))); err != nil {
		return nil, err
	}
	if err := writeEntry(tw, "index.json", bytesBlob(indexJSON)); err != nil {
		return nil, err
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: Epoch, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("write %s: %w", dir, err)
		}
	}
	digests := make([]v1.Hash, 0, len(blobs))
	for d := range blobs {
		digests = append(digests, d)
	}
	sort.Slice(digests, func(i, j int) bool { return digests[i].String() < digests[j].String() })
	for _, d := range digests {
		if err := writeEntry(tw, "blobs/"+d.Algorithm+"/"+d.Hex, blobs[d]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close image archive: %w", err)
	}
	sort.Slice(written, func(i, j int) bool { return written[i].Name < written[j].Name })
	return written, nil
}

func bytesBlob(b []byte) blob {
	return blob{size: int64(len(b)), open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}
}

func writeEntry(tw *tar.Writer, name string, b blob) error {
	hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: b.size, ModTime: Epoch, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	rc, err := b.open()
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	defer rc.Close()
	n, err := io.Copy(tw, rc)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if n != b.size {
		return fmt.Errorf("write %s: wrote %d bytes, descriptor says %d", name, n, b.size)
	}
	return nil
}
