// Package initramfs writes a tree.Tree as a newc cpio archive, compressed with zstd, which the kernel
// unpacks into its rootfs before running /init. Entries are sorted, owned by root and stamped with one
// time, and the zstd command runs single-threaded, so equal inputs give equal bytes.
package initramfs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/u-root/u-root/pkg/cpio"

	"github.com/cairn-os/cairn/image/internal/tree"
)

// WriteCPIO writes t to w as newc cpio.
func WriteCPIO(w io.Writer, t *tree.Tree, mtime int64) error {
	rw := cpio.Newc.Writer(w)
	for i, e := range t.Entries() {
		rec, err := record(e, uint64(i+1), uint64(mtime))
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
// depends only on the input and on the build host's zstd, as the root image's does on its mksquashfs). zstd decompresses as fast whatever the level, so the kernel's
// unpacking at every boot costs no more. The root image inside is LZ4 (rootfs/pack.go), which this pass
// compresses by another fifth: the 28.0 MB archive came to 22.4 MB with the Go encoder's best level
// (klauspost/compress, about zstd's level 11), 21.4 MB with zstd -19 (21.1 MB with --ultra -22, whose
// 32 MiB window the kernel would have to allocate while it unpacks).
var zstdArgs = []string{"-19", "-T1", "-q", "-c"}

// Write writes t to path as a zstd-compressed cpio archive.
func Write(ctx context.Context, path string, t *tree.Tree, mtime int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "zstd", zstdArgs...)
	cmd.Stdout, cmd.Stderr = f, &stderr
	in, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("write %s: zstd: %w", path, err)
	}
	bw := bufio.NewWriterSize(in, 1<<20)
	err = WriteCPIO(bw, t, mtime)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := in.Close(); err == nil {
		err = cerr
	}
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("zstd: %w: %s", werr, bytes.TrimSpace(stderr.Bytes()))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
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
