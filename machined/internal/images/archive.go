// Package images manages the container images of Kubernetes' containerd namespace (k8s.io) for the
// machine API: it imports image archives streamed to the node (spooled to EPHEMERAL, checked by a pure
// validator, imported and unpacked through containerd, nothing left half-imported on any failure), lists
// the images and removes them, refusing to remove what the node's own bundle carries unless forced.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"strings"

	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Formats of an image archive.
const (
	FormatOCI    = "OCI image layout"
	FormatDocker = "docker save archive"
)

// Archive is what Inspect found in an archive that containerd can import and unpack.
type Archive struct {
	Format string
	Gzip   bool // the tar was gzip-compressed
	// Images are the named images in the archive's order, each with the name containerd will give it.
	Images []ArchiveImage
}

// ArchiveImage is one named image of an archive.
type ArchiveImage struct {
	Name string
	// Digest is what the name will point to: the index.json entry's digest for an OCI layout; empty for a
	// docker archive, whose manifest containerd writes while it imports.
	Digest string
}

// Names lists the images' names.
func (a *Archive) Names() []string {
	names := make([]string, len(a.Images))
	for i, img := range a.Images {
		names[i] = img.Name
	}
	return names
}

// ArchiveError says what is wrong with an archive: a client's mistake (InvalidArgument at the API's edge),
// never the node's.
type ArchiveError struct{ Msg string }

func (e *ArchiveError) Error() string { return e.Msg }

func archiveErr(format string, args ...any) error {
	return &ArchiveError{Msg: fmt.Sprintf(format, args...)}
}

// Limits on what the validator keeps in memory: the JSON documents (index, manifests, configs) it needs
// to follow the archive's references. Layers are only hashed, never kept.
const (
	maxDocument  = 8 << 20
	maxDocuments = 64 << 20
)

// entry is one regular file of the archive.
type entry struct {
	size   int64
	digest digest.Digest // sha256 of the content
	head   []byte        // the first bytes: the compression magic of a layer
	doc    []byte        // the content, when it looks like a JSON document of at most maxDocument bytes
}

// scan is the archive's files, read in one pass.
type scan struct {
	files    map[string]*entry
	symlinks map[string]string // name -> target, both cleaned and relative to the archive's root
	order    []string          // regular files in archive order
	kept     int

	platform platforms.MatchComparer
	want     string // the platform's name, for messages
}

// Inspect reads an image archive (a tar, or a gzip-compressed tar) to its end and checks that containerd
// can import and unpack it for the platform: an OCI image layout (oci-layout and index.json) or a
// `docker save` archive (manifest.json); every blob the images reference present, with the size and the
// digest it is referenced by; at least one image with a name; each named image available for the
// platform (the node's: platforms.DefaultSpec()). It needs nothing but the bytes. A malformed archive
// gives an *ArchiveError saying what and where.
func Inspect(r io.Reader, platform ocispec.Platform) (*Archive, error) {
	raw := &countingReader{r: r}
	var head [4]byte
	n, err := io.ReadFull(raw, head[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n == 0 {
		return nil, archiveErr("the archive is empty (0 bytes)")
	}
	stream := io.MultiReader(bytes.NewReader(head[:n]), raw)
	a := &Archive{}
	switch {
	case n >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		zr, err := gzip.NewReader(stream)
		if err != nil {
			return nil, gzipErr(err, raw.n)
		}
		defer zr.Close()
		zr.Multistream(true)
		stream, a.Gzip = &gzipReader{zr: zr, raw: raw}, true
	case n == 4 && bytes.Equal(head[:], []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return nil, archiveErr("the archive is zstd-compressed; only plain or gzip-compressed tar archives are accepted (decompress it with zstd -d)")
	case n >= 3 && bytes.Equal(head[:3], []byte("BZh")):
		return nil, archiveErr("the archive is bzip2-compressed; only plain or gzip-compressed tar archives are accepted (decompress it with bunzip2)")
	case n == 4 && bytes.Equal(head[:], []byte{0xfd, '7', 'z', 'X'}):
		return nil, archiveErr("the archive is xz-compressed; only plain or gzip-compressed tar archives are accepted (decompress it with xz -d)")
	}
	s, err := readTar(stream, raw, a.Gzip)
	if err != nil {
		return nil, err
	}
	s.platform, s.want = platforms.Only(platform), platforms.Format(platform)
	switch {
	case s.files["oci-layout"] != nil:
		// containerd prefers the OCI layout when both are there (a docker save of Docker 25 and later).
		a.Format = FormatOCI
		a.Images, err = s.oci()
	case s.files["manifest.json"] != nil:
		a.Format = FormatDocker
		a.Images, err = s.docker()
	case s.files["index.json"] != nil:
		err = archiveErr("the archive has an index.json but no oci-layout file: not a complete OCI image layout")
	default:
		err = archiveErr("the archive is neither an OCI image layout (oci-layout and index.json) nor a docker save archive (manifest.json); it holds %s", listSome(s.order, 5))
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// readTar reads every entry, hashing regular files and keeping the small JSON ones. raw counts the
// archive's bytes, so a truncation is reported at the byte where the file ended.
func readTar(r io.Reader, raw *countingReader, gzipped bool) (*scan, error) {
	s := &scan{files: map[string]*entry{}, symlinks: map[string]string{}}
	// pos counts the tar stream's bytes: Go's tar reader takes a stream that ends at a block boundary, or
	// inside the padding after a file, for a complete archive, so the end-of-archive marker (two zero
	// blocks after the last file's padded data) is checked here.
	pos := &countingReader{r: r}
	tr := tar.NewReader(pos)
	last := ""
	var end int64 // where the last entry's padded data ends
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if pos.n < end+2*512 {
				if last == "" {
					return nil, archiveErr("not a tar archive, or one truncated at byte %d: it ends before its first tar header", raw.n)
				}
				return nil, archiveErr("archive truncated at byte %d: it ends after %s without the tar end-of-archive marker", raw.n, last)
			}
			break
		}
		if err != nil {
			return nil, tarErr(err, raw, gzipped, last)
		}
		end = pos.n + (hdr.Size+511)/512*512
		name := path.Clean(strings.TrimPrefix(hdr.Name, "/"))
		last = name
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			s.symlinks[name] = path.Join(path.Dir(name), hdr.Linkname)
			continue
		case tar.TypeReg:
		default:
			// Directories and anything else: containerd's importer ignores them too.
			continue
		}
		e, err := s.read(tr, hdr.Size)
		if err != nil {
			var gz *gzipError
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &gz) && gz.truncated {
				return nil, archiveErr("archive truncated at byte %d: %s ends early (it should be %d bytes)", raw.n, name, hdr.Size)
			}
			var ae *ArchiveError
			if errors.As(err, &ae) {
				return nil, err
			}
			return nil, tarErr(err, raw, gzipped, name)
		}
		if _, dup := s.files[name]; !dup {
			s.order = append(s.order, name)
		}
		s.files[name] = e
	}
	if len(s.order) == 0 && len(s.symlinks) == 0 {
		return nil, archiveErr("the archive holds no files")
	}
	return s, nil
}

// read hashes one file, keeping it when it looks like a JSON document small enough to parse later.
func (s *scan) read(r io.Reader, size int64) (*entry, error) {
	e := &entry{size: size}
	h := sha256.New()
	if size <= maxDocument {
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		h.Write(b)
		e.digest = digest.NewDigest(digest.SHA256, h)
		e.head = b[:min(len(b), 4)]
		if looksJSON(b) {
			if s.kept+len(b) > maxDocuments {
				return nil, archiveErr("the archive holds more than %d MiB of JSON documents; an image archive's indexes, manifests and configs are far smaller", maxDocuments>>20)
			}
			s.kept += len(b)
			e.doc = b
		}
		return e, nil
	}
	hw := &headWriter{h: h}
	n, err := io.Copy(hw, r)
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, io.ErrUnexpectedEOF
	}
	e.digest = digest.NewDigest(digest.SHA256, h)
	e.head = hw.head
	return e, nil
}

func looksJSON(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// headWriter hashes what passes and keeps its first bytes.
type headWriter struct {
	h    hash.Hash
	head []byte
}

func (w *headWriter) Write(p []byte) (int, error) {
	if len(w.head) < 4 {
		w.head = append(w.head, p[:min(len(p), 4-len(w.head))]...)
	}
	return w.h.Write(p)
}

// tarErr explains a tar reader's error: a truncated archive, a corrupt gzip stream, or bytes that are no
// tar at all.
func tarErr(err error, raw *countingReader, gzipped bool, last string) error {
	var gz *gzipError
	if errors.As(err, &gz) {
		return gz.err
	}
	after := ""
	if last != "" {
		after = " after " + last
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) && last == "" && !gzipped:
		return archiveErr("not a tar archive, or one truncated at byte %d: the file ends inside its first tar header", raw.n)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return archiveErr("archive truncated at byte %d: the file ends inside a tar header%s", raw.n, after)
	case errors.Is(err, tar.ErrHeader) && last == "":
		if gzipped {
			return archiveErr("not a tar archive: the gzip stream does not hold a tar archive")
		}
		return archiveErr("not a tar archive (nor a gzip-compressed one): the first 512 bytes are no tar header")
	case errors.Is(err, tar.ErrHeader):
		return archiveErr("archive corrupt near byte %d: an invalid tar header%s", raw.n, after)
	}
	return fmt.Errorf("read archive: %w", err)
}

// countingReader counts the bytes read from the archive file.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// gzipReader marks the gzip reader's errors, so they are reported as the compression's and not the tar's.
type gzipReader struct {
	zr  *gzip.Reader
	raw *countingReader
}

type gzipError struct {
	err       error
	truncated bool
}

func (e *gzipError) Error() string { return e.err.Error() }

func (g *gzipReader) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, &gzipError{err: gzipErr(err, g.raw.n), truncated: errors.Is(err, io.ErrUnexpectedEOF)}
	}
	return n, err
}

func gzipErr(err error, at int64) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return archiveErr("archive truncated at byte %d: the gzip stream ends early", at)
	}
	return archiveErr("the gzip stream is corrupt near byte %d: %v", at, err)
}

func listSome(names []string, n int) string {
	if len(names) == 0 {
		return "no files"
	}
	q := make([]string, 0, n)
	for i, name := range names {
		if i == n {
			q = append(q, fmt.Sprintf("and %d more", len(names)-n))
			break
		}
		q = append(q, fmt.Sprintf("%q", name))
	}
	return strings.Join(q, ", ")
}
