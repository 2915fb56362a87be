package kube

import (
	"fmt"
	"os"
	"sort"

	"github.com/cairn-os/cairn/machined/internal/atomicfile"
)

// File is one rendered file: where it goes, its bytes and its mode.
type File struct {
	Path string
	Data []byte
	Mode os.FileMode
}

// Files is a set of rendered files, sorted by path.
type Files []File

// Modes: keys and everything that embeds a key are for root only.
const (
	modeSecret os.FileMode = 0o600
	modePublic os.FileMode = 0o644
)

func (fs Files) sorted() Files {
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	return fs
}

// Get returns the file at path, or nil.
func (fs Files) Get(path string) *File {
	for i := range fs {
		if fs[i].Path == path {
			return &fs[i]
		}
	}
	return nil
}

// WriteFiles writes every file atomically (temporary file, fsync, rename, fsync of the directory), so a
// power cut leaves each file either old or new, never torn. It stops at the first error.
func WriteFiles(files Files) error {
	for _, f := range files {
		if f.Path == "" {
			return fmt.Errorf("write files: a file has no path")
		}
		if err := atomicfile.WriteFile(f.Path, f.Data, f.Mode); err != nil {
			return err
		}
	}
	return nil
}
