package testimages

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/image/bundle/internal/images"
	imageutils "k8s.io/kubernetes/test/utils/image"
)

// TestEveryManifestImageIsCovered fails when the pinned suite names an image that has no recipe and no
// reason to be left out: the way a Kubernetes upgrade that adds a test image is noticed.
func TestEveryManifestImageIsCovered(t *testing.T) {
	if got := Uncovered(); len(got) > 0 {
		t.Errorf("the suite's images without a recipe or a reason in NotNeeded/ProvidedByNode: %s", strings.Join(got, ", "))
	}
	for id := range recipes {
		if _, ok := NotNeeded[id]; ok {
			t.Errorf("image %d has a recipe and is listed as not needed", id)
		}
	}
}

// TestConformanceImagesAreBuilt pins the images the [Conformance] tests run (read from the pinned
// sources: imageutils IDs used in files with ConformanceIt) to recipes.
func TestConformanceImagesAreBuilt(t *testing.T) {
	for _, id := range []imageutils.ImageID{imageutils.Agnhost, imageutils.AgnhostPrev, imageutils.BusyBox,
		imageutils.GlibcDnsTesting, imageutils.Nginx, imageutils.NginxNew, imageutils.Kitten, imageutils.Nautilus,
		imageutils.NonRoot, imageutils.Nonewprivs, imageutils.APIServer, imageutils.Etcd} {
		if _, ok := recipes[id]; !ok {
			t.Errorf("no recipe for %s, which conformance tests run", imageutils.GetE2EImage(id))
		}
	}
	if _, ok := ProvidedByNode[imageutils.Pause]; !ok {
		t.Error("pause is neither built nor the node's")
	}
}

func fakeInputs() Inputs {
	lib := images.File{Path: "usr/lib/x86_64-linux-gnu/libc.so.6", Mode: 0o755, Data: []byte("libc")}
	return Inputs{
		Agnhost: []byte("agnhost"), Nonewprivs: []byte("nnp"), SampleAPIServer: []byte("sample"),
		Etcd: []byte("etcd"), EtcdVersion: "v3.6.16",
		Busybox:        []byte("busybox"),
		BusyboxApplets: []string{"bin/sh", "usr/bin/wget", "sbin/ip", "bin/busybox", "usr/bin/nc"},
		Tools: []images.File{
			{Path: "usr/sbin", Mode: images.Dir | 0o755},
			{Path: "usr/sbin/bash", Mode: 0o755, Data: []byte("bash")},
			{Path: "usr/sbin/nc.openbsd", Mode: 0o755, Data: []byte("nc")},
			{Path: "usr/sbin/dig", Mode: 0o755, Data: []byte("dig")},
			{Path: "usr/sbin/getent", Mode: 0o755, Data: []byte("getent")},
			{Path: "usr/sbin/curl", Mode: 0o755, Data: []byte("curl")},
			{Path: "usr/sbin/nginx", Mode: 0o755, Data: []byte("nginx")},
			{Path: "bin", Mode: fs.ModeSymlink | 0o777, Linkname: "usr/bin"},
			lib,
		},
		Sources: func(name string) ([]byte, error) {
			if strings.Contains(name, "..") {
				return nil, errors.New("bad name")
			}
			return []byte("source " + name), nil
		},
	}
}

// files returns the image's merged tree: each layer's entries, later layers winning.
func files(t *testing.T, n images.Named) map[string]*tar.Header {
	t.Helper()
	ls, err := n.Image.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	for _, l := range ls {
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

func byName(t *testing.T, imgs []images.Named, id imageutils.ImageID) images.Named {
	t.Helper()
	for _, n := range imgs {
		if n.Name == imageutils.GetE2EImage(id) {
			return n
		}
	}
	t.Fatalf("no image named %s", imageutils.GetE2EImage(id))
	return images.Named{}
}

func TestBuild(t *testing.T) {
	imgs, err := Build(fakeInputs())
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != len(Wanted()) {
		t.Fatalf("built %d images, want %d", len(imgs), len(Wanted()))
	}
	for _, tc := range []struct {
		id         imageutils.ImageID
		has, lacks []string
		entrypoint string
		user       string
	}{
		{id: imageutils.Agnhost, has: []string{"agnhost", "localhost.crt", "usr/bin/busybox", "usr/bin/sh", "usr/sbin/ip", "usr/sbin/dig", "usr/sbin/curl", "bin", "etc/passwd"}, lacks: []string{"bin/sh"}, entrypoint: "/agnhost"},
		{id: imageutils.BusyBox, has: []string{"usr/bin/wget", "usr/bin/ip", "usr/sbin/ip", "tmp"}, lacks: []string{"agnhost"}},
		{id: imageutils.GlibcDnsTesting, has: []string{"usr/sbin/dig", "usr/sbin/getent", "usr/lib/x86_64-linux-gnu/libc.so.6"}},
		{id: imageutils.Nginx, has: []string{"usr/sbin/nginx", "etc/nginx/nginx.conf", "usr/share/nginx/html/index.html"}, entrypoint: "/usr/sbin/nginx"},
		{id: imageutils.Kitten, has: []string{"kitten.jpg", "data.json", "agnhost"}, entrypoint: "/agnhost"},
		{id: imageutils.NonRoot, has: []string{"usr/bin/sh"}, user: "1234"},
		{id: imageutils.Nonewprivs, has: []string{"usr/local/bin/nnp"}},
		{id: imageutils.APIServer, has: []string{"kube-sample-apiserver"}, entrypoint: "/kube-sample-apiserver"},
		{id: imageutils.Etcd, has: []string{"usr/local/bin/etcd"}, entrypoint: "/usr/local/bin/etcd"},
	} {
		n := byName(t, imgs, tc.id)
		fs := files(t, n)
		for _, p := range tc.has {
			if fs[p] == nil {
				t.Errorf("%s lacks /%s", n.Name, p)
			}
		}
		for _, p := range tc.lacks {
			if fs[p] != nil {
				t.Errorf("%s has /%s, want it left out", n.Name, p)
			}
		}
		cfg, err := n.Image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cfg.Config.Entrypoint, " "); tc.entrypoint != "" && !strings.HasPrefix(got, tc.entrypoint) {
			t.Errorf("%s entrypoint = %q, want %s", n.Name, got, tc.entrypoint)
		}
		if cfg.Config.User != tc.user {
			t.Errorf("%s user = %q, want %q", n.Name, cfg.Config.User, tc.user)
		}
	}
	nnp := files(t, byName(t, imgs, imageutils.Nonewprivs))["usr/local/bin/nnp"]
	if nnp.Mode&0o4000 == 0 {
		t.Errorf("nnp mode %o, want set-user-ID", nnp.Mode)
	}
}

func TestBuildNamesWhatIsMissing(t *testing.T) {
	in := fakeInputs()
	in.Busybox = nil
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "busybox") {
		t.Errorf("Build without busybox: %v, want an error naming busybox", err)
	}
	in = fakeInputs()
	in.Tools = in.Tools[:4]
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "hack/deps.sh conformance installs it") {
		t.Errorf("Build without the host tools: %v, want an error saying how to install them", err)
	}
}

// TestToolsLayerIsShared: the images carrying host programs share one layer, stored once on the node.
func TestToolsLayerIsShared(t *testing.T) {
	imgs, err := Build(fakeInputs())
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]bool{}
	for _, id := range []imageutils.ImageID{imageutils.Agnhost, imageutils.BusyBox, imageutils.GlibcDnsTesting, imageutils.Nginx} {
		ls, err := byName(t, imgs, id).Image.Layers()
		if err != nil {
			t.Fatal(err)
		}
		d, err := ls[1].Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[d.String()] = true
	}
	if len(digests) != 1 {
		t.Errorf("the tools layers of agnhost, busybox, glibc-dns-testing and nginx have %d digests, want 1", len(digests))
	}
	// Debian 12's busybox ash drops environment variables such as data-1 (envFrom a Secret); bash keeps them.
	if sh := files(t, byName(t, imgs, imageutils.BusyBox))["usr/bin/sh"]; sh == nil || sh.Linkname != "/usr/sbin/bash" {
		t.Errorf("busybox image's /usr/bin/sh = %+v, want a link to /usr/sbin/bash", sh)
	}
	// Debian 12's busybox nc has no -v, -t or -u, which the tests use.
	if nc := files(t, byName(t, imgs, imageutils.Agnhost))["usr/bin/nc"]; nc == nil || nc.Linkname != "/usr/sbin/nc.openbsd" {
		t.Errorf("agnhost image's /usr/bin/nc = %+v, want a link to /usr/sbin/nc.openbsd", nc)
	}
}
