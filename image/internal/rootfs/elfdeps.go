package rootfs

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// libDirs are where Debian's dynamic loader finds libraries without an ld.so.cache; the rootfs puts
// every library in the first one (merged /usr), so the guest needs no cache either.
var libDirs = []string{"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib"}

// Binary is a host executable with everything it needs to run in the guest.
type Binary struct {
	Path   string            // host path of the executable
	Interp string            // PT_INTERP, e.g. /lib64/ld-linux-x86-64.so.2 ("" for static)
	Libs   map[string]string // soname → host path of the resolved file
}

// ResolveELF reads the executable at path (under root, "/" on the build host) and, transitively,
// its DT_NEEDED libraries, the way the loader would find them in libDirs.
func ResolveELF(root, path string) (Binary, error) {
	b := Binary{Path: path, Libs: map[string]string{}}
	f, err := elf.Open(filepath.Join(root, path))
	if err != nil {
		return b, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			buf := make([]byte, p.Filesz)
			if _, err := p.ReadAt(buf, 0); err != nil {
				return b, fmt.Errorf("%s: PT_INTERP: %w", path, err)
			}
			b.Interp = string(buf[:len(buf)-1]) // NUL-terminated
		}
	}
	queue, err := f.ImportedLibraries()
	if err != nil {
		return b, fmt.Errorf("%s: DT_NEEDED: %w", path, err)
	}
	for len(queue) > 0 {
		so := queue[0]
		queue = queue[1:]
		if _, done := b.Libs[so]; done {
			continue
		}
		lib, err := findLib(root, so)
		if err != nil {
			return b, fmt.Errorf("%s needs %s: %w", path, so, err)
		}
		b.Libs[so] = lib
		lf, err := elf.Open(filepath.Join(root, lib))
		if err != nil {
			return b, fmt.Errorf("read %s: %w", lib, err)
		}
		more, err := lf.ImportedLibraries()
		lf.Close()
		if err != nil {
			return b, fmt.Errorf("%s: DT_NEEDED: %w", lib, err)
		}
		queue = append(queue, more...)
	}
	return b, nil
}

func findLib(root, soname string) (string, error) {
	for _, d := range libDirs {
		p := filepath.Join(d, soname)
		if fi, err := os.Stat(filepath.Join(root, p)); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %v", libDirs)
}

// Sonames returns the binary's libraries sorted, for deterministic output.
func (b Binary) Sonames() []string {
	out := make([]string, 0, len(b.Libs))
	for so := range b.Libs {
		out = append(out, so)
	}
	sort.Strings(out)
	return out
}
