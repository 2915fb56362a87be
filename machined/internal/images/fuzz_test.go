package images

import (
	"bytes"
	"errors"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// FuzzInspect: any bytes as an uploaded image archive: Inspect never panics, refuses with an
// *ArchiveError (what the API maps to InvalidArgument), and what it accepts names at least one image.
func FuzzInspect(f *testing.F) {
	app := newImage(f, "app", "amd64")
	oci := tarOf(f, ociLayout(f, []ocispec.Descriptor{named(app.manifestDesc, ocispec.AnnotationRefName, "example.com/app:1.0")}, app.blobs()...)...)
	docker := tarOf(f, dockerSave(f, "app", "amd64", []string{"app:1.0"})...)
	for _, seed := range [][]byte{oci, gzipped(f, oci), docker, gzipped(f, docker), oci[:len(oci)/2], nil} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Inspect(bytes.NewReader(data), amd64)
		if err != nil {
			var ae *ArchiveError
			if !errors.As(err, &ae) {
				t.Fatalf("Inspect error %T (%v), want an *ArchiveError", err, err)
			}
			return
		}
		if len(a.Names()) == 0 {
			t.Fatalf("Inspect accepted an archive without a named image")
		}
	})
}
