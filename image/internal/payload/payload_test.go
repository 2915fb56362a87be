package payload

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/payload"
)

// entry is one tar entry of a test layer, owned by whoever runs the test (no root needed).
type entry struct {
	name, link string
	typ        byte
	mode       int64
	data       string
}

func layerTar(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.data)),
			Uid: os.Getuid(), Gid: os.Getgid(), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestExtractLayer(t *testing.T) {
	layer := layerTar(t,
		entry{name: "usr/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "usr/local/bin/kube", typ: tar.TypeReg, mode: 0o755, data: "binary"},
		entry{name: "usr/local/bin/kubelet", typ: tar.TypeSymlink, link: "kube", mode: 0o777},
		entry{name: "usr/local/bin/kube2", typ: tar.TypeLink, link: "usr/local/bin/kube"},
		entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
	)
	dir := filepath.Join(t.TempDir(), "layer")
	// Compressed, as the bundle's layers are; the diff ID is the uncompressed stream's digest.
	if err := extractLayer(bytes.NewReader(gz(t, layer)), digestOf(layer), dir); err != nil {
		t.Fatalf("extractLayer: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "usr/local/bin/kube")); err != nil || string(b) != "binary" {
		t.Errorf("kube = %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "usr/local/bin/kubelet")); err != nil || l != "kube" {
		t.Errorf("kubelet link = %q, %v", l, err)
	}
	a, _ := os.Stat(filepath.Join(dir, "usr/local/bin/kube"))
	b, _ := os.Stat(filepath.Join(dir, "usr/local/bin/kube2"))
	if !os.SameFile(a, b) {
		t.Errorf("kube2 is not a hard link of kube")
	}
	if fi, err := os.Stat(filepath.Join(dir, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("tmp mode = %v, %v; want sticky 0777", fi.Mode(), err)
	}
}

func TestExtractLayerRefuses(t *testing.T) {
	ok := layerTar(t, entry{name: "a", typ: tar.TypeReg, mode: 0o644, data: "x"})
	for _, tc := range []struct {
		name, diffID string
		layer        []byte
		want         string
	}{
		{"wrong diff ID", digestOf([]byte("other")), ok, "its content has digest " + digestOf(ok)},
		{"whiteout", "", layerTar(t, entry{name: "etc/.wh.passwd", typ: tar.TypeReg, mode: 0o644}), "whiteout"},
		{"escape", "", layerTar(t, entry{name: "../../etc/passwd", typ: tar.TypeReg, mode: 0o644}), "leaves the layer"},
		{"device", "", layerTar(t, entry{name: "dev/null", typ: tar.TypeChar, mode: 0o666}), "does not carry"},
		// Cut inside the data's padding, the tar reader sees a whole archive: the diff ID catches it.
		{"truncated", digestOf(ok), ok[:700], "its content has digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diffID := tc.diffID
			if diffID == "" {
				diffID = digestOf(tc.layer)
			}
			err := extractLayer(bytes.NewReader(tc.layer), diffID, filepath.Join(t.TempDir(), "l"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("extractLayer = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestStore converts a small OCI layout with two images sharing a layer.
func TestStore(t *testing.T) {
	layout := t.TempDir()
	write := func(b []byte) string {
		d := digestOf(b)
		h, _ := payload.Hex(d)
		p := filepath.Join(layout, "blobs", "sha256", h)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := layerTar(t, entry{name: "etc/passwd", typ: tar.TypeReg, mode: 0o644, data: "root:x:0:0::/:/sbin/nologin\n"})
	app := layerTar(t, entry{name: "app", typ: tar.TypeReg, mode: 0o755, data: "app"})
	baseBlob, appBlob := gz(t, base), gz(t, app)
	writeImage := func(name string, layers ...[]byte) map[string]any {
		var diffIDs []string
		var descs []map[string]any
		for i := 0; i < len(layers); i += 2 {
			diffIDs = append(diffIDs, digestOf(layers[i]))
			descs = append(descs, map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": write(layers[i+1]), "size": len(layers[i+1])})
		}
		cfg, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux", "rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs}, "config": map[string]any{"Entrypoint": []string{"/" + name}}})
		cd := write(cfg)
		m, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
			"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": len(cfg)}, "layers": descs})
		return map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": write(m), "size": len(m),
			"annotations": map[string]string{"io.containerd.image.name": "example.com/" + name + ":v1"}}
	}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{
		writeImage("app", base, baseBlob, app, appBlob),
		writeImage("base", base, baseBlob),
	}})
	os.WriteFile(filepath.Join(layout, "index.json"), index, 0o644)

	dir := t.TempDir()
	for _, d := range []string{payload.BlobsDir, payload.LayersDir} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	ix, err := store(layout, dir)
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	read, err := payload.ReadIndex(dir)
	if err != nil {
		t.Fatalf("ReadIndex: %v", err)
	}
	if diff := cmp.Diff(ix, read); diff != "" {
		t.Errorf("index.json does not read back (-wrote +read):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"example.com/app:v1", "example.com/base:v1"}, read.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	layers, _ := os.ReadDir(filepath.Join(dir, payload.LayersDir))
	if len(layers) != 2 {
		t.Errorf("%d layer directories, want 2: the shared one unpacked once", len(layers))
	}
	if b, err := os.ReadFile(filepath.Join(dir, payload.LayersDir, strings.TrimPrefix(digestOf(app), "sha256:"), "app")); err != nil || string(b) != "app" {
		t.Errorf("the app layer's file = %q, %v", b, err)
	}
	for _, img := range read.Images {
		for _, d := range []string{img.Manifest.Digest, img.Config.Digest} {
			h, _ := payload.Hex(d)
			if _, err := os.Stat(filepath.Join(dir, payload.BlobsDir, h)); err != nil {
				t.Errorf("%s: blob %s missing: %v", img.Name, d, err)
			}
		}
	}
}
