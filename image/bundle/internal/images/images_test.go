package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

var update = flag.Bool("update", false, "rewrite golden files")

var v = versions.Versions{
	Kubernetes: "v1.37.2", Etcd: "v3.6.16", Containerd: "v2.4.2", Runc: "v1.3.6",
	CNIPlugins: "v1.9.1", CoreDNS: "v1.15.0", Flannel: "v0.28.10", PauseTag: "3.10.2",
}

func fakeBinaries() Binaries {
	b := Binaries{}
	for _, n := range BinaryNames {
		b[n] = []byte("#!fake " + n + "\n")
	}
	return b
}

// fakeNetfilter stands in for hosttools' staged tree.
func fakeNetfilter() []File {
	return []File{
		{Path: "lib64", Mode: fs.ModeSymlink, Linkname: "usr/lib64"},
		{Path: "usr/sbin/nft", Mode: 0o755, Data: []byte("#!fake nft\n")},
		{Path: "usr/sbin/xtables-nft-multi", Mode: 0o755, Data: []byte("#!fake xtables\n")},
		{Path: "usr/sbin/iptables", Mode: fs.ModeSymlink, Linkname: "xtables-nft-multi"},
	}
}

func TestLayerTar(t *testing.T) {
	raw, err := LayerTar([]File{
		{Path: "/usr/local/bin/kube", Mode: 0o755, Data: []byte("bin")},
		{Path: "usr/local/bin/kubelet", Mode: fs.ModeSymlink, Linkname: "kube"},
		{Path: "tmp", Mode: Dir | fs.ModeSticky | 0o777},
	})
	if err != nil {
		t.Fatalf("LayerTar() error = %v", err)
	}
	var got []string
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(Epoch) || h.Uname != "" {
			t.Errorf("entry %s: uid %d gid %d uname %q mtime %v, want root-owned at Epoch", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
		got = append(got, fmt.Sprintf("%c %s %o %s", h.Typeflag, h.Name, h.Mode, h.Linkname))
	}
	want := []string{
		"5 tmp/ 1777 ",
		"5 usr/ 755 ",
		"5 usr/local/ 755 ",
		"5 usr/local/bin/ 755 ",
		"0 usr/local/bin/kube 755 ",
		"2 usr/local/bin/kubelet 777 kube",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LayerTar() entries mismatch (-want +got):\n%s", diff)
	}
}

func TestLayerTarRejects(t *testing.T) {
	for _, files := range [][]File{
		{{Path: "../etc/passwd", Mode: 0o644}},
		{{Path: "/", Mode: Dir | 0o755}},
		{{Path: "a", Mode: 0o644}, {Path: "/a", Mode: 0o644}},
	} {
		if _, err := LayerTar(files); err == nil {
			t.Errorf("LayerTar(%v) error = nil, want an error", files)
		}
	}
}

func buildArchive(t *testing.T) ([]byte, []Written, []Named) {
	t.Helper()
	imgs, err := Bundle(v, fakeBinaries(), fakeNetfilter())
	if err != nil {
		t.Fatalf("Bundle() error = %v", err)
	}
	var buf bytes.Buffer
	written, err := WriteArchive(&buf, imgs)
	if err != nil {
		t.Fatalf("WriteArchive() error = %v", err)
	}
	return buf.Bytes(), written, imgs
}

// The names are the contract with kubelet, containerd and machined's
// manifests; the digests are pinned so a change in how images are built
// (and so in reproducibility) shows up in review.
func TestArchiveGolden(t *testing.T) {
	archive, written, _ := buildArchive(t)
	var b strings.Builder
	for _, w := range written {
		fmt.Fprintf(&b, "%s %s\n", w.Name, w.Digest)
	}
	sum := sha256.Sum256(archive)
	fmt.Fprintf(&b, "archive sha256:%s\n", hex.EncodeToString(sum[:]))
	got := b.String()
	const path = "testdata/archive.golden"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("archive mismatch (-want +got):\n%s", diff)
	}
}

func TestArchiveIsReproducible(t *testing.T) {
	a, _, _ := buildArchive(t)
	b, _, _ := buildArchive(t)
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of the same bundle differ (%d vs %d bytes)", len(a), len(b))
	}
}

func TestKubeImagesShareTheBinaryLayer(t *testing.T) {
	_, _, imgs := buildArchive(t)
	kubeLayer := map[string]v1.Hash{}
	for _, n := range imgs {
		layers, err := n.Image.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(n.Name, "/kube-") || strings.Contains(n.Name, "/kubelet:") {
			d, err := layers[1].Digest()
			if err != nil {
				t.Fatal(err)
			}
			kubeLayer[n.Name] = d
		}
	}
	if len(kubeLayer) != 5 {
		t.Fatalf("found %d Kubernetes images, want 5: %v", len(kubeLayer), kubeLayer)
	}
	first := kubeLayer["registry.k8s.io/kube-apiserver:v1.37.2"]
	for name, d := range kubeLayer {
		if d != first {
			t.Errorf("%s kube layer = %s, want %s (shared with kube-apiserver)", name, d, first)
		}
	}
}

func TestImageConfigs(t *testing.T) {
	_, _, imgs := buildArchive(t)
	type summary struct {
		Entrypoint []string
		User       string
		Layers     int
	}
	got := map[string]summary{}
	for _, n := range imgs {
		cfg, err := n.Image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != "linux" || cfg.Architecture != "amd64" || !cfg.Created.Time.Equal(Epoch) {
			t.Errorf("%s: os/arch/created = %s/%s/%v, want linux/amd64/Epoch", n.Name, cfg.OS, cfg.Architecture, cfg.Created)
		}
		got[n.Name] = summary{cfg.Config.Entrypoint, cfg.Config.User, len(cfg.RootFS.DiffIDs)}
	}
	want := map[string]summary{
		"registry.k8s.io/kube-apiserver:v1.37.2":          {[]string{"/usr/local/bin/kube-apiserver"}, "", 2},
		"registry.k8s.io/kube-controller-manager:v1.37.2": {[]string{"/usr/local/bin/kube-controller-manager"}, "", 2},
		"registry.k8s.io/kube-scheduler:v1.37.2":          {[]string{"/usr/local/bin/kube-scheduler"}, "", 2},
		"registry.k8s.io/kube-proxy:v1.37.2":              {[]string{"/usr/local/bin/kube-proxy"}, "", 4},
		"registry.k8s.io/coredns/coredns:v1.15.0":         {[]string{"/coredns"}, "65532:65532", 3},
		"cairn.local/flannel:v0.28.10":                    {[]string{"/opt/bin/flanneld"}, "", 4},
		"cairn.local/kubelet:v1.37.2":                     {[]string{"/usr/local/bin/kubelet"}, "", 3},
		"registry.k8s.io/etcd:3.6.16-0":                   {[]string{"/usr/local/bin/etcd"}, "", 2},
		"registry.k8s.io/pause:3.10.2":                    {[]string{"/pause"}, "65535:65535", 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("image configs mismatch (-want +got):\n%s", diff)
	}
}

// Unpack the archive as an OCI layout and let go-containerregistry validate
// every image (digests, sizes, diff IDs), and check the layout holds each
// shared blob once with the name annotations containerd reads.
func TestArchiveIsValidLayout(t *testing.T) {
	archive, written, _ := buildArchive(t)
	dir := t.TempDir()
	files := untar(t, archive, dir)
	if files["oci-layout"] != 1 || files["index.json"] != 1 {
		t.Fatalf("archive lacks oci-layout or index.json: %v", files)
	}
	for name, n := range files {
		if n != 1 {
			t.Errorf("%s stored %d times, want once", name, n)
		}
		if strings.HasPrefix(name, "blobs/sha256/") {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if hex.EncodeToString(sum[:]) != strings.TrimPrefix(name, "blobs/sha256/") {
				t.Errorf("blob %s content does not match its name", name)
			}
		}
	}

	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("read layout: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != len(written) {
		t.Fatalf("index.json has %d manifests, want %d", len(m.Manifests), len(written))
	}
	for i, d := range m.Manifests {
		w := written[i]
		if d.Annotations[AnnotationContainerdName] != w.Name || d.Annotations[AnnotationRefName] != w.Name || d.Digest != w.Digest {
			t.Errorf("index entry %d = %s %v, want %s %s", i, d.Digest, d.Annotations, w.Digest, w.Name)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatalf("image %s: %v", w.Name, err)
		}
		if err := validate.Image(img); err != nil {
			t.Errorf("validate %s: %v", w.Name, err)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	var probe map[string]any
	if err := json.Unmarshal(raw, &probe); err != nil || probe["mediaType"] != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("index.json = %s, want an OCI image index", raw)
	}
}

func untar(t *testing.T, archive []byte, dir string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return seen
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		seen[h.Name]++
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBundleRejectsMissingInputs(t *testing.T) {
	bins := fakeBinaries()
	delete(bins, "etcd")
	if _, err := Bundle(v, bins, fakeNetfilter()); err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Errorf("Bundle() without etcd error = %v, want it named", err)
	}
	if _, err := Bundle(v, fakeBinaries(), nil); err == nil || !strings.Contains(err.Error(), "netfilter") {
		t.Errorf("Bundle() without netfilter tools error = %v, want it named", err)
	}
}

// layerEntries returns the tar headers of an image's layers by path, upper
// layers over lower ones, as a container sees them.
func layerEntries(t *testing.T, n Named) map[string]*tar.Header {
	t.Helper()
	layers, err := n.Image.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimSuffix(h.Name, "/")] = h
		}
		rc.Close()
	}
	return out
}

func byName(t *testing.T, imgs []Named, name string) Named {
	t.Helper()
	for _, n := range imgs {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no image %s", name)
	return Named{}
}

// kube-proxy and flannel run nft and iptables: both carry the same netfilter
// layer (stored once), and find the tools through PATH.
func TestNetfilterImages(t *testing.T) {
	_, _, imgs := buildArchive(t)
	var digests []v1.Hash
	for _, name := range []string{"registry.k8s.io/kube-proxy:v1.37.2", "cairn.local/flannel:v0.28.10"} {
		n := byName(t, imgs, name)
		files := layerEntries(t, n)
		for _, p := range []string{"usr/sbin/nft", "usr/sbin/iptables", "lib64"} {
			if files[p] == nil {
				t.Errorf("%s lacks /%s", name, p)
			}
		}
		cfg, err := n.Image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Config.Env) != 1 || !strings.Contains(cfg.Config.Env[0], ":/usr/sbin:") {
			t.Errorf("%s env = %v, want a PATH with /usr/sbin", name, cfg.Config.Env)
		}
		layers, err := n.Image.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			h, err := tar.NewReader(rc).Next()
			rc.Close()
			if err == nil && h.Name == "lib64" {
				d, err := l.Digest()
				if err != nil {
					t.Fatal(err)
				}
				digests = append(digests, d)
			}
		}
	}
	if len(digests) != 2 || digests[0] != digests[1] {
		t.Errorf("netfilter layers = %v, want one shared by kube-proxy and flannel", digests)
	}
	files := layerEntries(t, byName(t, imgs, "cairn.local/flannel:v0.28.10"))
	// flanneld is the kube binary's: upstream's path links to the kube
	// layer's link, which names the component.
	if h := files["opt/bin/flanneld"]; h == nil || h.Linkname != "/usr/local/bin/flanneld" {
		t.Errorf("flannel image /opt/bin/flanneld = %+v, want a link to /usr/local/bin/flanneld", h)
	}
	if h := files["usr/local/bin/flanneld"]; h == nil || h.Linkname != "kube" {
		t.Errorf("flannel image /usr/local/bin/flanneld = %+v, want a link to kube", h)
	}
	if h := files["usr/local/bin/kube"]; h == nil || h.Typeflag != tar.TypeReg {
		t.Errorf("flannel image /usr/local/bin/kube = %+v, want the kube binary", h)
	}
	proxy := layerEntries(t, byName(t, imgs, "registry.k8s.io/kube-proxy:v1.37.2"))
	// Its kube-proxy is the kube layer's link (kube prepares kube-proxy's
	// PATH itself); the directory that PATH may start with holds nft and
	// nothing else.
	if h := proxy["usr/local/bin/kube-proxy"]; h == nil || h.Linkname != "kube" {
		t.Errorf("kube-proxy image /usr/local/bin/kube-proxy = %+v, want a link to kube", h)
	}
	if h := proxy["usr/local/bin/kube"]; h == nil || h.Typeflag != tar.TypeReg {
		t.Errorf("kube-proxy image /usr/local/bin/kube = %+v, want the kube binary", h)
	}
	if h := proxy["usr/libexec/cairn-kube-proxy/nft"]; h == nil || h.Linkname != "/usr/sbin/nft" {
		t.Errorf("kube-proxy image /usr/libexec/cairn-kube-proxy/nft = %+v, want a link to /usr/sbin/nft", h)
	}
	for name := range proxy {
		if dir, base := path.Split(name); dir == "usr/libexec/cairn-kube-proxy/" && base != "nft" {
			t.Errorf("kube-proxy image has /%s beside nft in its nft-only directory", name)
		}
	}
}

// CoreDNS is the kube binary's coredns component: /coredns, the entrypoint
// upstream's image has, leads to it through the shared layer, and nothing
// carries a file capability (a pod sysctl lets 65532 bind port 53).
func TestCoreDNSImage(t *testing.T) {
	_, _, imgs := buildArchive(t)
	files := layerEntries(t, byName(t, imgs, "registry.k8s.io/coredns/coredns:v1.15.0"))
	if h := files["coredns"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/local/bin/coredns" {
		t.Fatalf("/coredns = %+v, want a link to usr/local/bin/coredns", h)
	}
	if h := files["usr/local/bin/coredns"]; h == nil || h.Linkname != "kube" {
		t.Errorf("/usr/local/bin/coredns = %+v, want a link to kube", h)
	}
	if h := files["usr/local/bin/kube"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
		t.Errorf("/usr/local/bin/kube = %+v, want an executable", h)
	}
	for name, h := range files {
		if len(h.PAXRecords) != 0 {
			t.Errorf("%s has PAX records %v, want none (no file capability)", name, h.PAXRecords)
		}
	}
	if files["etc/passwd"] == nil {
		t.Errorf("coredns image lacks the base files")
	}
	// The same kube layer as the Kubernetes images: stored once.
	kube := layerDigests(t, byName(t, imgs, "registry.k8s.io/kube-apiserver:v1.37.2"))
	dns := layerDigests(t, byName(t, imgs, "registry.k8s.io/coredns/coredns:v1.15.0"))
	if kube[1] != dns[1] {
		t.Errorf("coredns layer 1 = %s, want the kube layer %s", dns[1], kube[1])
	}
}

func layerDigests(t *testing.T, n Named) []v1.Hash {
	t.Helper()
	layers, err := n.Image.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Hash
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestDirFiles(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "usr/sbin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "usr/sbin/nft"), []byte("nft"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "usr/sbin/lib.so"), []byte("lib"), 0o644))
	must(os.Symlink("xtables-nft-multi", filepath.Join(dir, "usr/sbin/iptables")))
	must(os.Symlink("usr/lib64", filepath.Join(dir, "lib64")))
	files, err := DirFiles(dir)
	if err != nil {
		t.Fatalf("DirFiles() error = %v", err)
	}
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = fmt.Sprintf("%v %q %q", f.Mode, f.Data, f.Linkname)
	}
	want := map[string]string{
		"lib64":             `L--------- "" "usr/lib64"`,
		"usr":               `drwxr-xr-x "" ""`,
		"usr/sbin":          `drwxr-xr-x "" ""`,
		"usr/sbin/nft":      `-rwxr-xr-x "nft" ""`,
		"usr/sbin/lib.so":   `-rw-r--r-- "lib" ""`,
		"usr/sbin/iptables": `L--------- "" "xtables-nft-multi"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DirFiles() mismatch (-want +got):\n%s", diff)
	}
	// The layer does not depend on when the tree was staged.
	a, err := LayerTar(files)
	if err != nil {
		t.Fatal(err)
	}
	must(os.Chtimes(filepath.Join(dir, "usr/sbin/nft"), Epoch.AddDate(30, 0, 0), Epoch.AddDate(30, 0, 0)))
	again, err := DirFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LayerTar(again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("layer of the staged tree changed with a file's mtime")
	}

	if _, err := DirFiles(t.TempDir()); err == nil {
		t.Errorf("DirFiles(empty dir) error = nil, want an error")
	}
}
