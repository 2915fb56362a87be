// Package atomicfile writes files so that a power cut leaves either the old or the new content, never a
// torn one: write a temporary file, fsync it, rename it over the target, fsync the directory.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data atomically and durably, creating parent directories.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return writeFile(osFS{}, path, data, perm)
}

// fileSystem is what writeFile does to the disk, step by step; the crash test replays a power cut
// after each step through it.
type fileSystem interface {
	MkdirAll(dir string, perm os.FileMode) error
	CreateTemp(dir, pattern string) (file, error)
	Rename(from, to string) error
	Remove(name string) error
	SyncDir(dir string) error
}

type file interface {
	Name() string
	Write(b []byte) (int, error)
	Chmod(perm os.FileMode) error
	Sync() error
	Close() error
}

func writeFile(fsys fileSystem, path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := fsys.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer fsys.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	// The data must be on the disk before the rename can be: otherwise a power cut may keep the new name
	// with no data behind it (an empty lock file, which reads as no lock at all).
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fsys.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return fsys.SyncDir(dir)
}

// osFS is the real filesystem.
type osFS struct{}

func (osFS) MkdirAll(dir string, perm os.FileMode) error  { return os.MkdirAll(dir, perm) }
func (osFS) CreateTemp(dir, pattern string) (file, error) { return os.CreateTemp(dir, pattern) }
func (osFS) Rename(from, to string) error                 { return os.Rename(from, to) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) SyncDir(dir string) error                     { return SyncDir(dir) }

// SyncDir makes a directory's entries (a rename, a new file) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
