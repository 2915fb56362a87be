// Package initramfs writes a tree.Tree as the kernel's initramfs, which it unpacks into its rootfs before
// running /init: newc cpio archives, one of them compressed with zstd. Entries are sorted, owned by root
// and stamped with one time, and the zstd command runs single-threaded, so equal inputs give equal bytes.
package initramfs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/u-root/u-root/pkg/cpio"

	"github.com/cairn-os/cairn/image/internal/tree"
)

// WriteCPIO writes t to w as newc cpio.
func WriteCPIO(w io.Writer, t *tree.Tree, mtime int64) error {
	return writeEntries(w, t.Entries(), 1, mtime)
}

// writeEntries writes entries to w as one newc archive, numbering their inodes from ino.
func writeEntries(w io.Writer, entries []tree.Entry, ino uint64, mtime int64) error {
	rw := cpio.Newc.Writer(w)
	for i, e := range entries {
		rec, err := record(e, ino+uint64(i), uint64(mtime))
		if err != nil {
			return err
		}
		if err := rw.WriteRecord(rec); err != nil {
			return fmt.Errorf("cpio %s: %w", e.Path, err)
		}
	}
	if err := cpio.WriteTrailer(rw); err != nil {
		return fmt.Errorf("cpio trailer: %w", err)
	}
	return nil
}

func record(e tree.Entry, ino, mtime uint64) (cpio.Record, error) {
	info := cpio.Info{Ino: ino, NLink: 1, MTime: mtime, Name: tree.Rel(e.Path), Mode: uint64(e.Perm.Perm())}
	switch e.Kind {
	case tree.Dir:
		info.Mode |= cpio.S_IFDIR
		info.NLink = 2
		return cpio.Record{Info: info}, nil
	case tree.Symlink:
		info.Mode |= cpio.S_IFLNK
		return cpio.StaticRecord([]byte(e.Link), info), nil
	case tree.CharDev:
		info.Mode |= cpio.S_IFCHR
		info.Rmajor, info.Rminor = uint64(e.Dev[0]), uint64(e.Dev[1])
		return cpio.Record{Info: info}, nil
	case tree.File:
		info.Mode |= cpio.S_IFREG
		if e.Data != nil {
			return cpio.StaticRecord(e.Data, info), nil
		}
		f, err := os.Open(e.Src)
		if err != nil {
			return cpio.Record{}, fmt.Errorf("cpio %s: %w", e.Path, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return cpio.Record{}, fmt.Errorf("cpio %s: %w", e.Path, err)
		}
		if fi.Size() >= 1<<32 {
			f.Close()
			return cpio.Record{}, fmt.Errorf("cpio %s: %d bytes is over newc's 4 GiB limit", e.Path, fi.Size())
		}
		info.FileSize = uint64(fi.Size())
		// The cpio writer closes the file after copying it.
		return cpio.Record{ReaderAt: f, Info: info}, nil
	}
	return cpio.Record{}, fmt.Errorf("cpio %s: unknown entry kind %d", e.Path, e.Kind)
}

// zstdArgs compress the archive: the zstd command at level 19, single-threaded (its output then
// depends only on the input and on the build host's zstd, as the images' does on mksquashfs). zstd
// decompresses as fast whatever the level.
var zstdArgs = []string{"-19", "-T1", "-q", "-c"}

// Write writes t to path as an initramfs: the files at the stored paths first, as a plain newc archive,
// then every other entry as a zstd-compressed one. The kernel unpacks concatenated archives in order, each
// compressed or not, as it does early microcode's before the initramfs proper.
//
// stored is for files that are compressed already: squashfs images. The kernel decompresses the whole
// initramfs before init runs, on the boot's one CPU. zstd over an LZ4 image still takes a sixth off it,
// and under emulation decoding that cost every boot about half a second before init's line, for 1.8 MB
// of download (docs/figures.md). Stored files must sit at the root: the plain archive comes first,
// before any directory exists.
func Write(ctx context.Context, path string, t *tree.Tree, mtime int64, stored ...string) error {
	plain, packed, err := split(t.Entries(), stored)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = writePlain(f, plain, mtime)
	if err == nil {
		// zstd appends at f's offset, which it shares: after the plain archive.
		err = writeZstd(ctx, f, packed, uint64(len(plain))+1, mtime)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// split separates the entries at the stored paths (regular files at the root) from the others.
func split(entries []tree.Entry, stored []string) (plain, packed []tree.Entry, err error) {
	want := make(map[string]bool, len(stored))
	for _, p := range stored {
		want[p] = true
	}
	for _, e := range entries {
		if !want[e.Path] {
			packed = append(packed, e)
			continue
		}
		if e.Kind != tree.File || strings.Count(e.Path, "/") != 1 {
			return nil, nil, fmt.Errorf("%s: only a regular file at the root can be stored uncompressed", e.Path)
		}
		plain = append(plain, e)
		delete(want, e.Path)
	}
	for _, p := range stored {
		if want[p] {
			return nil, nil, fmt.Errorf("%s: not in the initramfs, so it cannot be stored uncompressed", p)
		}
	}
	return plain, packed, nil
}

// writePlain writes entries to f as a plain archive; none: nothing.
func writePlain(f *os.File, entries []tree.Entry, mtime int64) error {
	if len(entries) == 0 {
		return nil
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := writeEntries(bw, entries, 1, mtime); err != nil {
		return err
	}
	return bw.Flush()
}

// writeZstd appends entries to f as a zstd-compressed archive, numbering their inodes from ino.
func writeZstd(ctx context.Context, f *os.File, entries []tree.Entry, ino uint64, mtime int64) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "zstd", zstdArgs...)
	cmd.Stdout, cmd.Stderr = f, &stderr
	in, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return fmt.Errorf("zstd: %w", err)
	}
	bw := bufio.NewWriterSize(in, 1<<20)
	err = writeEntries(bw, entries, ino, mtime)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := in.Close(); err == nil {
		err = cerr
	}
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("zstd: %w: %s", werr, bytes.TrimSpace(stderr.Bytes()))
	}
	return err
}

// List renders an uncompressed cpio archive as one line per entry: mode, uid/gid, size, mtime, name
// (and link target), the form the golden tests compare.
func List(archive []byte) (string, error) {
	rr := cpio.Newc.Reader(bytes.NewReader(archive))
	var b bytes.Buffer
	for {
		rec, err := rr.ReadRecord()
		if err == io.EOF { // the newc reader turns the trailer into io.EOF
			return b.String(), nil
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%07o %d/%d %8d %d %s", rec.Mode, rec.UID, rec.GID, rec.FileSize, rec.MTime, rec.Name)
		if rec.Mode&cpio.S_IFMT == cpio.S_IFLNK {
			target := make([]byte, rec.FileSize)
			if _, err := rec.ReadAt(target, 0); err != nil && err != io.EOF {
				return "", err
			}
			fmt.Fprintf(&b, " -> %s", target)
		}
		if rec.Mode&cpio.S_IFMT == cpio.S_IFCHR {
			fmt.Fprintf(&b, " dev %d,%d", rec.Rmajor, rec.Rminor)
		}
		b.WriteString("\n")
	}
}
