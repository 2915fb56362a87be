// Package tree describes a filesystem image as data: every path with its type, mode and content source,
// all owned by root and stamped with one time. The rootfs and the initramfs are both built from a Tree,
// so what lands in them is decided in one place, can be listed in tests, and is the same on every build.
package tree

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Kind is the type of an entry.
type Kind int

// Entry kinds.
const (
	Dir Kind = iota
	File
	Symlink
	CharDev
)

// Entry is one path in the image. Paths are absolute and clean ("/usr/bin/x").
type Entry struct {
	Path string
	Kind Kind
	Perm fs.FileMode // permission bits only
	Src  string      // File: host file to copy, when Data is nil
	Data []byte      // File: literal content
	Link string      // Symlink: target
	Dev  [2]uint32   // CharDev: major, minor
}

// Tree is a set of entries keyed by path. Parents are created as 0755 directories on demand.
type Tree struct {
	entries map[string]Entry
}

// New returns an empty tree holding only "/".
func New() *Tree {
	return &Tree{entries: map[string]Entry{"/": {Path: "/", Kind: Dir, Perm: 0o755}}}
}

// Add puts e into the tree, creating missing parents. Adding a path twice is an error unless both are
// directories, so two sources cannot silently fight over one file.
func (t *Tree) Add(e Entry) error {
	p := path.Clean("/" + e.Path)
	e.Path = p
	if old, ok := t.entries[p]; ok {
		if old.Kind == Dir && e.Kind == Dir {
			return nil
		}
		return fmt.Errorf("image path %s added twice", p)
	}
	if p != "/" {
		if err := t.Add(Entry{Path: path.Dir(p), Kind: Dir, Perm: 0o755}); err != nil {
			return err
		}
		if parent := t.entries[path.Dir(p)]; parent.Kind != Dir {
			return fmt.Errorf("image path %s: parent is not a directory", p)
		}
	}
	t.entries[p] = e
	return nil
}

// Dirs adds empty directories.
func (t *Tree) Dirs(perm fs.FileMode, paths ...string) error {
	for _, p := range paths {
		if err := t.Add(Entry{Path: p, Kind: Dir, Perm: perm}); err != nil {
			return err
		}
	}
	return nil
}

// Copy adds a host file.
func (t *Tree) Copy(dst, src string, perm fs.FileMode) error {
	return t.Add(Entry{Path: dst, Kind: File, Perm: perm, Src: src})
}

// Bytes adds a file with literal content.
func (t *Tree) Bytes(dst string, data []byte, perm fs.FileMode) error {
	if data == nil {
		data = []byte{}
	}
	return t.Add(Entry{Path: dst, Kind: File, Perm: perm, Data: data})
}

// Link adds a symbolic link.
func (t *Tree) Link(dst, target string) error {
	return t.Add(Entry{Path: dst, Kind: Symlink, Perm: 0o777, Link: target})
}

// Has reports whether p is in the tree.
func (t *Tree) Has(p string) bool {
	_, ok := t.entries[path.Clean("/"+p)]
	return ok
}

// Entries returns every entry sorted by path in byte order, which puts each parent before its children.
func (t *Tree) Entries() []Entry {
	out := make([]Entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Rel returns p without its leading slash ("." for the root), the form cpio and staging dirs use.
func Rel(p string) string {
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}
