package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/client"
	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/cairn-os/cairn/machined/internal/paths"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestSpool(t *testing.T) {
	data := []byte(strings.Repeat("x", 3000))
	tests := []struct {
		name    string
		h       Header
		r       io.Reader
		wantErr string
	}{
		{"size and checksum", Header{Size: 3000, SHA256: sum(data)}, bytes.NewReader(data), ""},
		{"nothing announced", Header{}, bytes.NewReader(data), ""},
		{"fewer bytes than announced", Header{Size: 4000}, bytes.NewReader(data), "the upload ended at byte 3000 of the 4000 announced"},
		{"more bytes than announced", Header{Size: 2000}, bytes.NewReader(data), "the client sent more than the 2000 bytes it announced"},
		{"wrong checksum", Header{SHA256: sum([]byte("other"))}, bytes.NewReader(data), "but the client computed " + sum([]byte("other"))},
		{"nothing sent", Header{}, bytes.NewReader(nil), "the archive is empty"},
		{"upload broken", Header{Size: 3000}, io.MultiReader(bytes.NewReader(data[:100]), &failing{errors.New("stream reset")}), "stream reset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.CreateTemp(t.TempDir(), "spool")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var last Progress
			n, err := spool(f, tc.r, tc.h, func(p Progress) { last = p })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("spool() = %d, %v; want an error with %q", n, err, tc.wantErr)
				}
				return
			}
			if err != nil || n != 3000 {
				t.Fatalf("spool() = %d, %v; want 3000 bytes", n, err)
			}
			if last.Phase != PhaseReceiving || last.Received != 3000 || last.Size != tc.h.Size {
				t.Errorf("last progress = %+v, want all 3000 bytes received", last)
			}
			if b, _ := os.ReadFile(f.Name()); !bytes.Equal(b, data) {
				t.Errorf("spool file holds %d bytes, want the 3000 sent", len(b))
			}
		})
	}
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

func TestImportWithoutContainerd(t *testing.T) {
	s := &Service{Paths: paths.Paths{Root: t.TempDir()}, Client: func() *client.Client { return nil }}
	var nr *NotRunningError
	if _, err := s.Import(context.Background(), Header{}, bytes.NewReader(nil), nil); !errors.As(err, &nr) {
		t.Errorf("Import() = %v, want a NotRunningError", err)
	}
	if _, err := s.List(context.Background()); !errors.As(err, &nr) {
		t.Errorf("List() = %v, want a NotRunningError", err)
	}
	if _, err := s.Remove(context.Background(), []string{"x"}, false); !errors.As(err, &nr) {
		t.Errorf("Remove() = %v, want a NotRunningError", err)
	}
	if _, err := os.Stat(s.SpoolDir()); !os.IsNotExist(err) {
		t.Errorf("spool directory %s made for a node without containerd (%v)", s.SpoolDir(), err)
	}
}

// notUsed stands for a running containerd the test never reaches: the imports here fail before it.
func notUsed() *client.Client { return &client.Client{} }

// A refused archive, or an upload that breaks off, leaves no spool file; the phases come in order.
func TestImportRefusedLeavesNothing(t *testing.T) {
	root := t.TempDir()
	s := &Service{Paths: paths.Paths{Root: root}, Client: notUsed}
	// Leftovers of an import machined did not finish are cleared.
	if err := os.MkdirAll(s.SpoolDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.SpoolDir()+"/import-old.tar", []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	app := newImage(t, "app", "amd64")
	archive := tarOf(t, ociLayout(t, []ocispec.Descriptor{app.manifestDesc}, app.blobs()...)...) // no name
	var phases []string
	_, err := s.Import(context.Background(), Header{FileName: "app.tar", Size: uint64(len(archive))}, bytes.NewReader(archive),
		func(p Progress) { phases = append(phases, p.Phase) })
	var ae *ArchiveError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "no image in the archive has a name") {
		t.Fatalf("Import(unnamed) = %v, want an ArchiveError", err)
	}
	if got := strings.Join(phases, ","); got != "receiving,verifying" {
		t.Errorf("phases = %s, want receiving,verifying", got)
	}
	assertEmpty(t, s.SpoolDir())

	_, err = s.Import(context.Background(), Header{FileName: "app.tar", Size: uint64(len(archive))},
		io.MultiReader(bytes.NewReader(archive[:100]), &failing{context.Canceled}), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Import(cancelled upload) = %v, want context.Canceled", err)
	}
	assertEmpty(t, s.SpoolDir())
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s left behind in %s", e.Name(), dir)
	}
}

func TestImportOneAtATime(t *testing.T) {
	s := &Service{Paths: paths.Paths{Root: t.TempDir()}, Client: notUsed}
	release, err := s.begin("first.tar")
	if err != nil {
		t.Fatal(err)
	}
	var busy *BusyError
	_, err = s.Import(context.Background(), Header{FileName: "second.tar"}, bytes.NewReader([]byte("x")), nil)
	if !errors.As(err, &busy) || !strings.Contains(err.Error(), "another image import (first.tar, started") {
		t.Fatalf("Import() during another = %v, want a BusyError naming first.tar", err)
	}
	release()
	if _, err := s.Import(context.Background(), Header{FileName: "second.tar"}, bytes.NewReader([]byte("x")), nil); errors.As(err, &busy) {
		t.Fatalf("Import() after the first finished = %v, want it to run", err)
	}
}

func TestCheckSpace(t *testing.T) {
	s := &Service{Paths: paths.Paths{Root: "/n"}, Usage: func(string) (uint64, uint64, error) { return 1 << 30, 600 << 20, nil }}
	if err := s.checkSpace("/n/var/lib/cairn/image-import", 100<<20); err != nil {
		t.Errorf("checkSpace(100 MiB with 424 MiB free) = %v, want nil", err)
	}
	err := s.checkSpace("/n/var/lib/cairn/image-import", 300<<20)
	var ns *NoSpaceError
	if !errors.As(err, &ns) || !strings.Contains(err.Error(), "the archive is 300.0 MiB: importing it needs 664.0 MiB free") || !strings.Contains(err.Error(), "/n/var has 424.0 MiB") {
		t.Errorf("checkSpace(300 MiB with 424 MiB free) = %v, want a NoSpaceError with the figures", err)
	}
	if err := s.checkSpace("/x", 0); err != nil {
		t.Errorf("checkSpace(unknown size) = %v, want nil", err)
	}
}

func TestResolveAndIDRefs(t *testing.T) {
	img := func(name, target string) ctrimages.Image {
		return ctrimages.Image{Name: name, Target: ocispec.Descriptor{Digest: digest.Digest("sha256:" + strings.Repeat(target, 64))}}
	}
	all := []ctrimages.Image{
		img("docker.io/library/app:1.0", "a"), img("example.com/app:1.0", "a"), img("sha256:"+strings.Repeat("c", 64), "a"),
		img("docker.io/library/solo:2", "b"), img("sha256:"+strings.Repeat("d", 64), "b"),
	}
	byName := map[string]ctrimages.Image{}
	for _, i := range all {
		byName[i.Name] = i
	}
	resolved, missing := resolve([]string{"app:1.0", "docker.io/library/app:1.0", "solo:2", "nope", "Bad Name"}, byName)
	if !slices.Equal(resolved, []string{"docker.io/library/app:1.0", "docker.io/library/solo:2"}) || !slices.Equal(missing, []string{"nope", "Bad Name"}) {
		t.Errorf("resolve() = %v, missing %v", resolved, missing)
	}
	// app's content keeps a name (example.com/app:1.0): its image ID stays. solo had one name: its ID goes.
	got := withIDRefs(resolved, all)
	want := []string{"docker.io/library/app:1.0", "docker.io/library/solo:2", "sha256:" + strings.Repeat("d", 64)}
	if !slices.Equal(got, want) {
		t.Errorf("withIDRefs() = %v, want %v", got, want)
	}
	if got := withIDRefs([]string{"docker.io/library/app:1.0", "example.com/app:1.0"}, all); len(got) != 3 {
		t.Errorf("withIDRefs(both names of app) = %v, want its image ID too", got)
	}
}

func TestRemoveProtectsTheBundle(t *testing.T) {
	s := &Service{Bundled: func() ([]string, error) { return []string{"registry.k8s.io/pause:3.10"}, nil }}
	pause := ctrimages.Image{Name: "registry.k8s.io/pause:3.10", Target: ocispec.Descriptor{Digest: digest.FromString("pause")}}
	id := ctrimages.Image{Name: "sha256:" + strings.Repeat("e", 64), Target: pause.Target}
	app := ctrimages.Image{Name: "docker.io/library/app:1.0", Target: ocispec.Descriptor{Digest: digest.FromString("app")}}
	byName := map[string]ctrimages.Image{pause.Name: pause, id.Name: id, app.Name: app}
	var pe *ProtectedError
	if err := s.checkProtected([]string{app.Name, pause.Name, id.Name}, byName); !errors.As(err, &pe) || !slices.Equal(pe.Names, []string{pause.Name, id.Name}) {
		t.Errorf("checkProtected() = %v, want the pause image and its ID refused", err)
	}
	if err := s.checkProtected([]string{app.Name}, byName); err != nil {
		t.Errorf("checkProtected(app) = %v, want nil", err)
	}
	unreadable := func() ([]string, error) { return nil, errors.New("payload image index: no such file") }
	if err := (&Service{Bundled: unreadable}).checkProtected([]string{app.Name}, byName); err == nil || !strings.Contains(err.Error(), "force") {
		t.Errorf("checkProtected(unreadable bundled list) = %v, want a refusal that mentions force", err)
	}
}
