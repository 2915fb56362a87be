// Command hosttools stages host programs with their shared libraries, the dynamic loader, iptables'
// extensions and the usual alternative names into a directory, laid out exactly as in the root image
// (image/internal/rootfs.Tools does both). The Kubernetes bundle packs the directory as the netfilter
// tools layer of its kube-proxy and flannel images.
//
//	go run ./image/cmd/hosttools -out DIR [-host-root /] TOOL...   stage (DIR must be empty or absent)
//	go run ./image/cmd/hosttools -digest [-host-root /] TOOL...    print a digest of what would be staged
//
// The digest covers every path, kind, mode, link target and file content, so it changes when a Debian
// upgrade changes a tool or one of its libraries: the bundle puts it in its stamp.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cairn-os/cairn/image/internal/rootfs"
	"github.com/cairn-os/cairn/image/internal/tree"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "hosttools: %v\n", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: hosttools (-out DIR | -digest) [-host-root /] TOOL [TOOL ...]")

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hosttools", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to stage the tools into (must be empty or absent)")
	digest := fs.Bool("digest", false, "print a digest of the tree to stdout")
	hostRoot := fs.String("host-root", "/", "where the tools and their libraries are taken from")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() == 0 || (*out == "" && !*digest) {
		return errUsage
	}
	t, err := rootfs.Tools(*hostRoot, fs.Args())
	if err != nil {
		return err
	}
	if *digest {
		d, err := Digest(t)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, d)
	}
	if *out == "" {
		return nil
	}
	if err := tree.Stage(t, *out); err != nil {
		return err
	}
	var files int
	var size int64
	for _, e := range t.Entries() {
		n, err := tree.Size(e)
		if err != nil {
			return err
		}
		if e.Kind == tree.File {
			files++
		}
		size += n
	}
	fmt.Fprintf(stderr, "hosttools: staged %d files (%.1f MiB) into %s\n", files, float64(size)/(1<<20), *out)
	return nil
}

// Digest hashes every entry of t in path order: kind, mode, path, link target and the SHA-256 of a
// file's content (read from the host for copied files).
func Digest(t *tree.Tree) (string, error) {
	h := sha256.New()
	for _, e := range t.Entries() {
		sum := ""
		if e.Kind == tree.File {
			s, err := contentSHA256(e)
			if err != nil {
				return "", err
			}
			sum = s
		}
		fmt.Fprintf(h, "%d %04o %q %q %s\n", e.Kind, e.Perm, e.Path, e.Link, sum)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func contentSHA256(e tree.Entry) (string, error) {
	h := sha256.New()
	if e.Data != nil {
		h.Write(e.Data)
	} else {
		f, err := os.Open(e.Src)
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", e.Path, err)
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return "", fmt.Errorf("hash %s: %w", e.Path, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
