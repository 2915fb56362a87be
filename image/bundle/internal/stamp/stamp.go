// Package stamp decides whether the bundle must be rebuilt: it hashes every
// input (versions.env, the bundle's sources, the toolchain) and remembers the
// hash with the outputs it produced.
package stamp

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// FileName is the stamp's name inside the output directory.
const FileName = "stamp"

// isInput says whether a file under the bundle's source tree can change the
// outputs. Tests, golden files and docs cannot.
func isInput(d fs.DirEntry) bool {
	name := d.Name()
	switch {
	case strings.HasSuffix(name, "_test.go"):
		return false
	case strings.HasSuffix(name, ".go"), name == "go.mod", name == "go.sum", name == "versions.env":
		return true
	}
	return false
}

// Hash returns a digest of the source tree's inputs plus extra strings (the
// Go version, a hash of libseccomp, ...). Paths are hashed relative to src,
// so the checkout's location does not matter. A conformance/ directory below
// src is not an input: the conformance suite's build (its own module, with
// its own stamp) cannot change what the node runs.
func Hash(src string, extra ...string) (string, error) {
	h := sha256.New()
	var files []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == filepath.Join(src, "conformance") {
				return filepath.SkipDir
			}
			if p != src && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if isInput(d) {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("walk bundle sources %s: %w", src, err)
	}
	sort.Strings(files)
	for _, rel := range files {
		f, err := os.Open(filepath.Join(src, rel))
		if err != nil {
			return "", fmt.Errorf("hash input: %w", err)
		}
		fh := sha256.New()
		_, err = io.Copy(fh, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hash input %s: %w", rel, err)
		}
		fmt.Fprintf(h, "file %s %x\n", filepath.ToSlash(rel), fh.Sum(nil))
	}
	for _, e := range extra {
		fmt.Fprintf(h, "extra %q\n", e)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Write records the input hash and the size of every output (paths relative
// to out).
func Write(out, inputs string, outputs []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "inputs %s\n", inputs)
	for _, rel := range outputs {
		fi, err := os.Stat(filepath.Join(out, rel))
		if err != nil {
			return fmt.Errorf("stamp output: %w", err)
		}
		fmt.Fprintf(&b, "output %s %d\n", rel, fi.Size())
	}
	tmp := filepath.Join(out, FileName+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write stamp: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(out, FileName)); err != nil {
		return fmt.Errorf("write stamp: %w", err)
	}
	return nil
}

// UpToDate reports whether out holds a build of exactly these inputs whose
// outputs are all still there with their recorded sizes. The reason says
// why not, for the progress line.
func UpToDate(out, inputs string) (bool, string) {
	f, err := os.Open(filepath.Join(out, FileName))
	if err != nil {
		return false, "no previous build"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sawInputs, outputs := false, 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 2 && fields[0] == "inputs":
			if fields[1] != inputs {
				return false, "inputs changed"
			}
			sawInputs = true
		case len(fields) == 3 && fields[0] == "output":
			want, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				return false, "stamp unreadable"
			}
			fi, err := os.Stat(filepath.Join(out, fields[1]))
			if err != nil || fi.Size() != want {
				return false, fields[1] + " missing or changed"
			}
			outputs++
		default:
			return false, "stamp unreadable"
		}
	}
	if !sawInputs || outputs == 0 {
		return false, "stamp unreadable"
	}
	return true, ""
}
