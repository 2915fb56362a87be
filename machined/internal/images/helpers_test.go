package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The tests build their archives from parts, so each can break exactly one thing.

type tfile struct {
	name string
	data []byte
	link string // a symbolic link to this target instead of a file
}

func tarOf(t testing.TB, files ...tfile) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if f.link != "" {
			hdr = &tar.Header{Name: f.name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: f.link, ModTime: time.Unix(0, 0)}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// layerTar is a layer: a tar holding one file.
func layerTar(t testing.TB, content string) []byte {
	return tarOf(t, tfile{name: "hello.txt", data: []byte(content)})
}

// image is one image's blobs: a gzip layer, its config and its manifest.
type image struct {
	layer, config, manifest []byte
	manifestDesc            ocispec.Descriptor
}

func newImage(t testing.TB, content, arch string) image {
	t.Helper()
	raw := layerTar(t, content)
	layer := gzipped(t, raw)
	cfg := ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: arch},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(raw)}}}
	config := mustJSON(t, cfg)
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(config), Size: int64(len(config))},
		Layers: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromBytes(layer), Size: int64(len(layer))}}}
	m.SchemaVersion = 2
	manifest := mustJSON(t, m)
	return image{layer: layer, config: config, manifest: manifest,
		manifestDesc: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(manifest), Size: int64(len(manifest))}}
}

func blobFile(b []byte) tfile {
	return tfile{name: "blobs/sha256/" + digest.FromBytes(b).Encoded(), data: b}
}

func (i image) blobs() []tfile {
	return []tfile{blobFile(i.layer), blobFile(i.config), blobFile(i.manifest)}
}

// ociLayout is an OCI layout's files: oci-layout, index.json listing the descriptors, then the blobs.
func ociLayout(t testing.TB, descs []ocispec.Descriptor, blobs ...tfile) []tfile {
	idx := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: descs}
	idx.SchemaVersion = 2
	files := []tfile{
		{name: "oci-layout", data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "index.json", data: mustJSON(t, idx)},
	}
	return append(files, blobs...)
}

func named(d ocispec.Descriptor, annotations ...string) ocispec.Descriptor {
	d.Annotations = map[string]string{}
	for i := 0; i+1 < len(annotations); i += 2 {
		d.Annotations[annotations[i]] = annotations[i+1]
	}
	return d
}

// dockerSave is a docker save archive of one image: the config as HEX.json, the layer uncompressed as
// ID/layer.tar (the classic layout), manifest.json last as go-containerregistry writes it.
func dockerSave(t testing.TB, content, arch string, tags []string) []tfile {
	t.Helper()
	layer := layerTar(t, content)
	cfg := ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: arch},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(layer)}}}
	config := mustJSON(t, cfg)
	cfgName := digest.FromBytes(config).Encoded() + ".json"
	layerName := "0123abcd/layer.tar"
	manifest := mustJSON(t, []dockerManifest{{Config: cfgName, RepoTags: tags, Layers: []string{layerName}}})
	return []tfile{{name: cfgName, data: config}, {name: layerName, data: layer}, {name: "manifest.json", data: manifest}}
}

// replace returns files with the named one's content replaced (or removed, with nil data).
func replace(files []tfile, name string, data []byte) []tfile {
	var out []tfile
	for _, f := range files {
		if f.name == name {
			if data == nil {
				continue
			}
			f.data = data
		}
		out = append(out, f)
	}
	return out
}
