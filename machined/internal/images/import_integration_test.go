//go:build integration

package images

// TestImportContainerd runs image imports through the bundle's containerd (`make bundle`, _out/bundle),
// started with the config a node renders: archives built here with go-containerregistry, a docker save
// archive and a gzip-compressed OCI layout, land in k8s.io unpacked into overlayfs (the CRI's
// snapshotter), are listed and removed; a truncated archive and one whose layer cannot be unpacked leave
// no image behind, and the broken one's content is garbage-collected at once. Needs root; skips without
// the bundle.
//
//	go test -tags integration -count=1 -run TestImportContainerd ./machined/internal/images/

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	godigest "github.com/opencontainers/go-digest"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

// startContainerd runs the bundle's containerd with the config a control-plane node renders, under a
// scratch root, until the test ends.
func startContainerd(t *testing.T) (*client.Client, paths.Paths) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	bundle, err := filepath.Abs(filepath.Join("..", "..", "..", "_out", "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bundle, "bin", "containerd")); err != nil {
		t.Skipf("no built bundle in %s (make bundle): %v", bundle, err)
	}
	// A short directory: the socket path must fit the 108 bytes of a unix socket address.
	root, err := os.MkdirTemp("", "img-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	p := paths.Paths{Root: root}
	cfg, err := config.Parse(testcluster.New(t).ControlPlaneYAML)
	if err != nil {
		t.Fatal(err)
	}
	r, err := kube.New(cfg, kube.Node{Name: "n1", IPs: []netip.Addr{netip.MustParseAddr("10.9.0.2")}}, p, kube.DefaultImages())
	if err != nil {
		t.Fatal(err)
	}
	f, err := r.ContainerdConfig(kube.ContainerdOptions{RestrictOOMScoreAdj: true, CNIBinDir: filepath.Join(bundle, "cni")})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.WriteFiles(kube.Files{f}); err != nil {
		t.Fatal(err)
	}
	l := r.Layout()
	for _, d := range []string{l.ContainerdRoot(), l.ContainerdState(), l.CNIConfDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(root, "containerd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(filepath.Join(bundle, "bin", "containerd"), "--config", f.Path)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(bundle, "bin")+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		// overlayfs snapshots may still be mounted under the root: unmount before it is removed.
		_ = exec.Command("umount", "-R", l.ContainerdRoot()).Run()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := containerd.Connect(ctx, l.ContainerdSocket())
	if err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("%v\n%s", err, log)
	}
	t.Cleanup(func() { cli.Close() })
	return cli, p
}

// testImage is a linux/amd64 image of one layer holding one file; garbage makes the layer's
// (uncompressed) bytes no tar at all, so it imports but cannot be unpacked.
func testImage(t *testing.T, content string, garbage bool) v1.Image {
	t.Helper()
	var layerBytes []byte
	if garbage {
		layerBytes = make([]byte, 4096)
		if _, err := rand.Read(layerBytes); err != nil {
			t.Fatal(err)
		}
	} else {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		_ = tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0)})
		_, _ = tw.Write([]byte(content))
		_ = tw.Close()
		layerBytes = b.Bytes()
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Cmd = []string{"/hello"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// dockerArchive writes a docker save archive of the image under the tag.
func dockerArchive(t *testing.T, img v1.Image, tag string) []byte {
	t.Helper()
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tarball.Write(ref, img, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// ociArchive writes an OCI image layout holding the image named ref, as a tar.
func ociArchive(t *testing.T, img v1.Image, ref string) []byte {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func headerFor(file string, b []byte) Header {
	h := sha256.Sum256(b)
	return Header{FileName: file, Size: uint64(len(b)), SHA256: hex.EncodeToString(h[:])}
}

func TestImportContainerd(t *testing.T) {
	cli, p := startContainerd(t)
	ctx := context.Background()
	nctx := namespaces.WithNamespace(ctx, Namespace)
	lowered := false // containerd's CPU weight, as the Unpacking hook left it
	s := &Service{Paths: p, Client: func() *client.Client { return cli }, Unpacking: func() func() {
		lowered = true
		return func() { lowered = false }
	}}

	importArchive := func(t *testing.T, file string, b []byte) ([]Image, []Progress, error) {
		t.Helper()
		var progress []Progress
		imgs, err := s.Import(ctx, headerFor(file, b), bytes.NewReader(b), func(p Progress) {
			if got := lowered; got != (p.Phase == PhaseUnpacking) {
				t.Errorf("%s phase: containerd's weight lowered = %v, want it lowered while it unpacks and only then", p.Phase, got)
			}
			progress = append(progress, p)
		})
		if lowered {
			t.Errorf("Import() returned with containerd's weight still lowered")
		}
		assertEmpty(t, s.SpoolDir())
		return imgs, progress, err
	}
	// Every record of the namespace, the CRI's image-ID references (sha256:CONFIG) included.
	records := func(t *testing.T) map[string]string {
		t.Helper()
		imgs, err := cli.ImageService().List(nctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, i := range imgs {
			out[i.Name] = i.Target.Digest.String()
		}
		return out
	}
	targetGone := func(t *testing.T, what, digest string) {
		t.Helper()
		for n, d := range records(t) {
			if d == digest {
				t.Errorf("after %s, %s still points at %s", what, n, digest)
			}
		}
	}

	dockerImg := testImage(t, "docker", false)
	ociImg := testImage(t, "oci", false)
	const dockerName, ociName = "example.com/cairn-test/docker:1.0", "docker.io/library/cairn-oci:1.0"
	ociTar := ociArchive(t, ociImg, "cairn-oci:1.0") // a short ref name: normalised
	dockerTar := dockerArchive(t, dockerImg, dockerName)

	t.Run("docker save archive", func(t *testing.T) {
		imgs, progress, err := importArchive(t, "docker.tar", dockerTar)
		if err != nil {
			t.Fatalf("Import() = %v", err)
		}
		if len(imgs) != 1 || imgs[0].Name != dockerName || !imgs[0].Unpacked || imgs[0].Size == 0 {
			t.Fatalf("Import() = %+v, want %s unpacked", imgs, dockerName)
		}
		var phases []string
		for _, p := range progress {
			phases = append(phases, p.Phase+" "+p.Image)
		}
		if want := []string{"receiving ", "verifying ", "importing ", "unpacking " + dockerName}; !slices.Equal(phases, want) {
			t.Errorf("progress = %q, want %q", phases, want)
		}
	})
	t.Run("gzip OCI layout", func(t *testing.T) {
		imgs, _, err := importArchive(t, "oci.tar.gz", gzipped(t, ociTar))
		if err != nil {
			t.Fatalf("Import() = %v", err)
		}
		digest, _ := ociImg.Digest()
		if len(imgs) != 1 || imgs[0].Name != ociName || imgs[0].Digest != digest.String() {
			t.Fatalf("Import() = %+v, want %s at %s", imgs, ociName, digest)
		}
	})
	t.Run("listed and unpacked into overlayfs", func(t *testing.T) {
		imgs, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, i := range imgs {
			if i.Name != dockerName && i.Name != ociName {
				continue
			}
			found++
			if !i.Unpacked || i.Size == 0 || i.Bundled {
				t.Errorf("List() has %+v, want it unpacked, sized and not bundled", i)
			}
			img, err := cli.ImageService().Get(nctx, i.Name)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := client.NewImageWithPlatform(cli, img, platforms.Default()).IsUnpacked(nctx, "overlayfs")
			if err != nil || !ok {
				t.Errorf("%s unpacked into overlayfs: %t, %v", i.Name, ok, err)
			}
		}
		if found != 2 {
			t.Errorf("List() = %+v, want both imported images", imgs)
		}
	})
	t.Run("remove", func(t *testing.T) {
		if _, err := s.Remove(ctx, []string{dockerName, "nope:1"}, false); !errors.As(err, new(*NotFoundError)) || !strings.Contains(err.Error(), "nope:1") {
			t.Fatalf("Remove(one missing) = %v, want a NotFoundError naming nope:1", err)
		}
		target := records(t)[ociName]
		removed, err := s.Remove(ctx, []string{"cairn-oci:1.0"}, false) // the short name
		if err != nil || len(removed) == 0 || removed[0] != ociName {
			t.Fatalf("Remove(cairn-oci:1.0) = %v, %v; want %s removed", removed, err, ociName)
		}
		t.Logf("removed %v", removed)
		// The CRI's image-ID reference goes with the last name, or it would keep the content.
		targetGone(t, "its removal", target)
	})
	t.Run("bundled images are kept unless forced", func(t *testing.T) {
		b := &Service{Paths: p, Client: func() *client.Client { return cli }, Bundled: func() ([]string, error) { return []string{dockerName}, nil }}
		imgs, _ := b.List(ctx)
		for _, i := range imgs {
			if i.Name == dockerName && !i.Bundled {
				t.Errorf("List() with the bundle: %+v not bundled", i)
			}
		}
		if _, err := b.Remove(ctx, []string{dockerName}, false); !errors.As(err, new(*ProtectedError)) {
			t.Fatalf("Remove(bundled) = %v, want a ProtectedError", err)
		}
		target := records(t)[dockerName]
		if _, err := b.Remove(ctx, []string{dockerName}, true); err != nil {
			t.Fatalf("Remove(bundled, force) = %v", err)
		}
		targetGone(t, "its forced removal", target)
	})
	t.Run("the node's payload", func(t *testing.T) {
		checkPayload(ctx, t, cli, p)
	})
	t.Run("truncated archive", func(t *testing.T) {
		before := records(t)
		cut := dockerTar[:len(dockerTar)*2/3]
		_, _, err := importArchive(t, "docker.tar", cut)
		var ae *ArchiveError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), "archive truncated at byte") {
			t.Fatalf("Import(truncated) = %v, want an ArchiveError saying where it was truncated", err)
		}
		t.Logf("truncated archive: %v", err)
		if after := records(t); !maps.Equal(before, after) {
			t.Errorf("images after a refused import = %v, want %v", after, before)
		}
	})
	t.Run("unpack fails: nothing left, the old image back", func(t *testing.T) {
		const over = "example.com/cairn-test/over:1.0"
		good := testImage(t, "good", false)
		if _, _, err := importArchive(t, "good.tar", dockerArchive(t, good, over)); err != nil {
			t.Fatal(err)
		}
		goodImg, err := cli.ImageService().Get(nctx, over)
		if err != nil {
			t.Fatal(err)
		}
		broken := testImage(t, "", true)
		layers, _ := broken.Layers()
		layerDigest, _ := layers[0].Digest()
		for _, tc := range []struct{ name, file string }{{over, "over.tar"}, {"example.com/cairn-test/broken:1.0", "broken.tar"}} {
			before := records(t)
			_, _, err := importArchive(t, tc.file, dockerArchive(t, broken, tc.name))
			if err == nil || !strings.Contains(err.Error(), "unpack "+tc.name) {
				t.Fatalf("Import(garbage layer as %s) = %v, want it to fail unpacking", tc.name, err)
			}
			t.Logf("broken layer: %v", err)
			if after := records(t); !maps.Equal(before, after) {
				t.Errorf("images after a failed unpack = %v, want %v", after, before)
			}
			if _, err := cli.ContentStore().Info(nctx, godigest.Digest(layerDigest.String())); !errdefs.IsNotFound(err) {
				t.Errorf("the broken layer's content after the failed import: %v, want it collected (not found)", err)
			}
		}
		if img, err := cli.ImageService().Get(nctx, over); err != nil || img.Target.Digest != goodImg.Target.Digest {
			t.Errorf("%s after a failed re-import = %v, %v; want it back at %s", over, img.Target.Digest, err, goodImg.Target.Digest)
		}
	})
}
