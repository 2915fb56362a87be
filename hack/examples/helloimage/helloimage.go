// Package helloimage packs the hello example (hack/examples/hello) into an image archive that
// `cairnctl image import` takes: one layer with the static binary, nothing pulled from anywhere. The
// end-to-end tests build their workload image with it, and `make example-image` writes the archive the
// README's example imports.
package helloimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Ref is the image's name: not a registry anyone pulls from, so the image can only come from an import.
const Ref = "example.local/hello:v1"

// Build compiles the hello command as a static binary (pure Go, stripped) from the repository at root.
func Build(root string) ([]byte, error) { return BuildPackage(root, "./hack/examples/hello") }

// BuildPackage compiles the command pkg (a path relative to root) as Build does: the end-to-end tests
// pack their other test programs the same way.
func BuildPackage(root, pkg string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "hello-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return os.ReadFile(out)
}

// Write packs binary as /hello (the entrypoint; with no arguments it serves HTTP on :8080) into a
// docker-save archive tagged ref.
func Write(w io.Writer, binary []byte, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o755, Size: int64(len(binary)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(binary); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	data := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{"/hello"}
	cfg.Config.User = "65532:65532"
	cfg.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.Write(tag, img, w)
}
