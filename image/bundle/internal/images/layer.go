// Package images builds the bundle's OCI images with go-containerregistry.
// Everything is made reproducible: fixed times, root ownership, sorted
// entries, so the same binaries always give the same digests.
package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is the time stamped on every file, config and history entry. A fixed
// time is what makes two builds byte-identical.
var Epoch = time.Unix(0, 0).UTC()

// File is one entry of a layer.
type File struct {
	Path     string      // inside the image, without a leading slash
	Mode     fs.FileMode // permission bits, plus fs.ModeSymlink for links (fs.ModeSetuid and fs.ModeSticky kept)
	Data     []byte      // content of a regular file
	Linkname string      // target of a symlink
}

// Dir marks a File as a directory when used as its Mode type bit.
const Dir = fs.ModeDir

// LayerTar returns the uncompressed tar of files. Missing parent directories
// are added (0755), entries are sorted by path, and every header carries
// uid/gid 0 and Epoch.
func LayerTar(files []File) ([]byte, error) {
	entries := map[string]File{}
	for _, f := range files {
		p := path.Clean(strings.TrimPrefix(f.Path, "/"))
		if p == "." || strings.HasPrefix(p, "../") {
			return nil, fmt.Errorf("layer entry %q: path must be inside the image", f.Path)
		}
		if _, dup := entries[p]; dup {
			return nil, fmt.Errorf("layer entry %q given twice", p)
		}
		f.Path = p
		entries[p] = f
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := entries[dir]; !ok {
				entries[dir] = File{Path: dir, Mode: Dir | 0o755}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		f := entries[p]
		hdr := &tar.Header{
			Name:    p,
			Mode:    int64(f.Mode.Perm()),
			ModTime: Epoch,
			Format:  tar.FormatPAX,
		}
		switch {
		case f.Mode&fs.ModeDir != 0:
			hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
			// Sticky bit for directories such as /tmp.
			if f.Mode&fs.ModeSticky != 0 {
				hdr.Mode |= 0o1000
			}
		case f.Mode&fs.ModeSymlink != 0:
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Linkname, 0o777
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
			// Set-user-ID programs, such as the conformance suite's no-new-privileges probe.
			if f.Mode&fs.ModeSetuid != 0 {
				hdr.Mode |= 0o4000
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", p, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, fmt.Errorf("layer entry %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer tar: %w", err)
	}
	return buf.Bytes(), nil
}

// Layer returns files as a gzip-compressed OCI layer. The compressed bytes
// are kept in memory because each layer is hashed and then written once.
func Layer(files []File) (v1.Layer, error) {
	raw, err := LayerTar(files)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithCompressedCaching, tarball.WithMediaType(types.OCILayer))
}

// DirFiles reads a staged directory tree (image/cmd/hosttools' output) as
// layer entries: directories, regular files with their permission bits, and
// symlinks. Owners and times on disk are ignored (LayerTar sets root and
// Epoch), so the layer depends only on paths, modes and contents. Any other
// kind of file is an error.
func DirFiles(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := File{Path: filepath.ToSlash(rel), Mode: info.Mode().Perm()}
		switch {
		case d.IsDir():
			f.Mode |= Dir | info.Mode()&fs.ModeSticky
		case d.Type()&fs.ModeSymlink != 0:
			f.Mode = fs.ModeSymlink
			if f.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if f.Data, err = os.ReadFile(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: %s is neither a file, a directory nor a symlink", dir, rel)
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read staged tree: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("read staged tree: %s is empty", dir)
	}
	return files, nil
}
