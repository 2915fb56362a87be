package images

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"

	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/paths"
)

// Namespace is where the images live: the kubelet's, through containerd's CRI plugin.
const Namespace = containerd.NamespaceK8s

// Image is an image of the namespace.
type Image struct {
	Name     string
	Digest   string // what the name points to
	Size     uint64 // the node's platform's manifest, config and layers
	Bundled  bool   // carried by the node's image bundle
	Unpacked bool
}

// Service imports, lists and removes the images of containerd's k8s.io namespace.
type Service struct {
	Paths paths.Paths
	// Client is the node's containerd client, nil until the node has started containerd.
	Client func() *client.Client
	// Bundled lists the images the node carries (nil: none), which Remove keeps unless forced.
	Bundled func() ([]string, error)
	// Usage reports the size and use of the filesystem holding a path (nil: free space is not checked).
	Usage func(path string) (size, used uint64, err error)
	// Unpacking lowers containerd's share of the CPU while it imports and unpacks an archive, and returns
	// what gives it back (nil: nothing to lower). An unpack can take both CPUs of a small node for
	// minutes; the control plane's pods must not wait for it (cgroups.RuntimeUnpacking).
	Unpacking func() (done func())

	mu      sync.Mutex
	running *running // the import in progress
	bundled map[string]bool
}

type running struct {
	file  string
	since time.Time
}

// NotRunningError: the node has not started containerd (yet).
type NotRunningError struct{}

func (*NotRunningError) Error() string { return "containerd is not running on this node yet" }

// BusyError: another import is in progress. One at a time keeps the spool's disk use and the node's
// load bounded; the client retries.
type BusyError struct {
	File  string
	Since time.Time
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("another image import (%s, started %s ago) is in progress; try again when it has finished",
		e.File, time.Since(e.Since).Round(time.Second))
}

// NotFoundError names images that are not in the namespace.
type NotFoundError struct{ Names []string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no image named %s in containerd's %s namespace", strings.Join(e.Names, ", "), Namespace)
}

// ProtectedError names bundled images a removal would take from the node.
type ProtectedError struct{ Names []string }

func (e *ProtectedError) Error() string {
	return fmt.Sprintf("%s: carried by the node's image bundle (its control plane, kubelet or add-ons need it); force removes it anyway",
		strings.Join(e.Names, ", "))
}

// SpoolDir is where an upload is kept while it is checked and imported: on EPHEMERAL, never in memory.
func (s *Service) SpoolDir() string { return s.Paths.Join("var", "lib", "cairn", "image-import") }

// spoolMargin is the room left on EPHEMERAL beyond what an import is expected to take.
const spoolMargin = 64 << 20

// Import receives an archive from data (the header announced it), spools it to EPHEMERAL, verifies it,
// imports it into the namespace and unpacks its images, telling progress each step. It returns the
// images imported. The spool file is removed whatever happens; a failure leaves no image behind.
func (s *Service) Import(ctx context.Context, h Header, data io.Reader, progress func(Progress)) ([]Image, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	cli := s.client()
	if cli == nil {
		return nil, &NotRunningError{}
	}
	release, err := s.begin(h.FileName)
	if err != nil {
		return nil, err
	}
	defer release()
	dir := s.SpoolDir()
	// Whatever is in the spool directory is left from an import machined did not finish (it stopped):
	// only the import holding the lock uses it.
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool directory: %w", err)
	}
	if err := s.checkSpace(dir, h.Size); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "import-*.tar")
	if err != nil {
		return nil, fmt.Errorf("spool the archive: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	if _, err := spool(f, data, h, progress); err != nil {
		return nil, err
	}

	progress(Progress{Phase: PhaseVerifying})
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	arch, err := Inspect(bufio.NewReaderSize(f, 1<<20), platforms.DefaultSpec())
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	progress(Progress{Phase: PhaseImporting})
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	if arch.Gzip {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("decompress the archive: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	done := func() {}
	if s.Unpacking != nil {
		done = s.Unpacking()
	}
	imgs, err := containerd.Import(ctx, cli, r, Namespace, containerd.ImportOptions{
		RefName:   RefName,
		Unpacking: func(name string) { progress(Progress{Phase: PhaseUnpacking, Image: name}) },
	})
	done()
	if err != nil {
		return nil, err
	}
	bundled, _ := s.bundledNames()
	nctx := namespaces.WithNamespace(ctx, Namespace)
	out := make([]Image, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, describe(nctx, cli, img, bundled, true))
	}
	return out, nil
}

// begin takes the import lock.
func (s *Service) begin(file string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running != nil {
		return nil, &BusyError{File: s.running.file, Since: s.running.since}
	}
	if file == "" {
		file = "unnamed archive"
	}
	s.running = &running{file: file, since: time.Now()}
	return func() {
		s.mu.Lock()
		s.running = nil
		s.mu.Unlock()
	}, nil
}

// checkSpace refuses an archive EPHEMERAL cannot hold twice over: the spool file and containerd's copy
// of its blobs (the unpacked layers need more still, which containerd reports if it runs out).
func (s *Service) checkSpace(dir string, size uint64) error {
	if s.Usage == nil || size == 0 {
		return nil
	}
	total, used, err := s.Usage(dir)
	if err != nil || used > total {
		return nil // no figure to judge by; a full disk still fails cleanly while spooling
	}
	free, need := total-used, 2*size+spoolMargin
	if free < need {
		return &NoSpaceError{Msg: fmt.Sprintf("the archive is %s: importing it needs %s free on the node's EPHEMERAL volume (the upload and containerd's copy of it), and %s has %s",
			humanBytes(size), humanBytes(need), s.Paths.Var(), humanBytes(free))}
	}
	return nil
}

// List lists the images of the namespace by name. The CRI's image-ID references (sha256:CONFIG, which it
// adds for every image it sees) are left out while a name points at the same content: they are the same
// image.
func (s *Service) List(ctx context.Context) ([]Image, error) {
	cli := s.client()
	if cli == nil {
		return nil, &NotRunningError{}
	}
	ctx = namespaces.WithNamespace(ctx, Namespace)
	imgs, err := cli.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	bundled, _ := s.bundledNames()
	named := map[string]bool{} // targets with a name
	for _, img := range imgs {
		if !isIDRef(img.Name) {
			named[img.Target.Digest.String()] = true
		}
	}
	out := make([]Image, 0, len(imgs))
	for _, img := range imgs {
		if isIDRef(img.Name) && named[img.Target.Digest.String()] {
			continue
		}
		out = append(out, describe(ctx, cli, img, bundled, false))
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// isIDRef reports whether an image name is an image ID (sha256:CONFIG), the reference the CRI keeps for
// every image it has seen.
func isIDRef(name string) bool { return strings.HasPrefix(name, "sha256:") }

// describe reports an image: its size for this platform and, unless known, whether it is unpacked.
func describe(ctx context.Context, cli *client.Client, img ctrimages.Image, bundled map[string]bool, unpacked bool) Image {
	i := client.NewImageWithPlatform(cli, img, platforms.Default())
	out := Image{Name: img.Name, Digest: img.Target.Digest.String(), Bundled: bundled[img.Name], Unpacked: unpacked}
	if size, err := i.Size(ctx); err == nil && size > 0 {
		out.Size = uint64(size)
	}
	if !unpacked {
		out.Unpacked, _ = i.IsUnpacked(ctx, "")
	}
	return out
}

// Remove removes images by name: the full name, or a short one that normalises to it (app:1.0 for
// docker.io/library/app:1.0). It removes nothing unless every name is found and, without force, none is
// bundled. When no name is left for an image, the CRI's image-ID reference to it goes too, or it would
// keep the content (and the kubelet would still list the image). It returns the full names removed.
func (s *Service) Remove(ctx context.Context, names []string, force bool) ([]string, error) {
	cli := s.client()
	if cli == nil {
		return nil, &NotRunningError{}
	}
	ctx = namespaces.WithNamespace(ctx, Namespace)
	is := cli.ImageService()
	all, err := is.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	byName := map[string]ctrimages.Image{}
	for _, img := range all {
		byName[img.Name] = img
	}
	resolved, missing := resolve(names, byName)
	if len(missing) > 0 {
		return nil, &NotFoundError{Names: missing}
	}
	if !force {
		if err := s.checkProtected(resolved, byName); err != nil {
			return nil, err
		}
	}
	remove := withIDRefs(resolved, all)
	var removed []string
	for i, n := range remove {
		var opts []ctrimages.DeleteOpt
		if i == len(remove)-1 {
			// The last deletion waits for the garbage collector: the space is free when the call returns.
			opts = append(opts, ctrimages.SynchronousDelete())
		}
		if err := is.Delete(ctx, n, opts...); err != nil && !errdefs.IsNotFound(err) {
			return removed, fmt.Errorf("remove %s: %w", n, err)
		}
		removed = append(removed, n)
	}
	return removed, nil
}

// resolve finds each name as given, or as normalised.
func resolve(names []string, byName map[string]ctrimages.Image) (resolved, missing []string) {
	for _, n := range names {
		full := n
		_, ok := byName[n]
		if !ok {
			if norm, err := normalize(n); err == nil {
				full = norm
				_, ok = byName[norm]
			}
		}
		switch {
		case !ok:
			missing = append(missing, n)
		case !slices.Contains(resolved, full):
			resolved = append(resolved, full)
		}
	}
	return resolved, missing
}

// withIDRefs adds to the names being removed the image-ID references of the images no other name keeps.
func withIDRefs(names []string, all []ctrimages.Image) []string {
	out := slices.Clone(names)
	target := map[string]digest.Digest{}
	for _, img := range all {
		target[img.Name] = img.Target.Digest
	}
	for _, n := range names {
		kept := slices.ContainsFunc(all, func(img ctrimages.Image) bool {
			return !isIDRef(img.Name) && !slices.Contains(names, img.Name) && img.Target.Digest == target[n]
		})
		if kept {
			continue
		}
		for _, img := range all {
			if isIDRef(img.Name) && img.Target.Digest == target[n] && !slices.Contains(out, img.Name) {
				out = append(out, img.Name)
			}
		}
	}
	return out
}

// checkProtected refuses bundled images: by name, or an image ID whose content a bundled name uses.
func (s *Service) checkProtected(names []string, byName map[string]ctrimages.Image) error {
	bundled, err := s.bundledNames()
	if err != nil {
		return fmt.Errorf("cannot tell which images the node's bundle carries (force removes without asking): %w", err)
	}
	bundledTargets := map[digest.Digest]bool{}
	for n := range bundled {
		if img, ok := byName[n]; ok {
			bundledTargets[img.Target.Digest] = true
		}
	}
	var protected []string
	for _, n := range names {
		if bundled[n] || isIDRef(n) && bundledTargets[byName[n].Target.Digest] {
			protected = append(protected, n)
		}
	}
	if len(protected) > 0 {
		return &ProtectedError{Names: protected}
	}
	return nil
}

func (s *Service) client() *client.Client {
	if s.Client == nil {
		return nil
	}
	return s.Client()
}

// bundledNames reads the names of the node's own images once.
func (s *Service) bundledNames() (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bundled != nil {
		return s.bundled, nil
	}
	if s.Bundled == nil {
		return map[string]bool{}, nil
	}
	names, err := s.Bundled()
	if err != nil {
		return map[string]bool{}, err
	}
	s.bundled = map[string]bool{}
	for _, n := range names {
		s.bundled[n] = true
	}
	return s.bundled, nil
}
