// Package unpack is machined's unpack-payload: it unpacks the ISO's payload stream (api/payload.ISOStream,
// one zstd frame) into a new file. The root image's api/payload.UnpackHelper is a link to machined, which
// runs Main when it is called by that name.
//
// Why a process of its own: the stream's window spans the whole payload image (2^28 bytes), and the
// decoder keeps that much of what it unpacked in memory. In machined, PID 1, that would be a heap of a
// quarter of a gigabyte against its soft limit of 96 MiB (memory.go); in a process of its own it is given
// back to the kernel, every page of it, when the process exits.
package unpack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"

	"github.com/cairn-os/cairn/api/payload"
)

// Name is the program name (argv[0]'s last element) by which machined is unpack-payload.
const Name = "unpack-payload"

const usage = "usage: unpack-payload STREAM FILE\n\nUnpacks the zstd stream STREAM into FILE, which must not exist, and syncs it.\n"

// Main unpacks args[0] into args[1] (args without the program name) and returns the exit status.
func Main(args []string, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err := File(args[0], args[1]); err != nil {
		fmt.Fprintln(stderr, "unpack-payload:", err)
		return 1
	}
	return 0
}

// File unpacks the stream in src into dst, which it creates (it must not exist), and syncs dst. A dst cut
// short by an error is removed.
func File(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(dst)
		}
	}()
	if err := Stream(out, in); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	return out.Sync()
}

// Stream writes what the zstd stream r unpacks to into w. It refuses a stream whose window is wider than
// the payload's (api/payload.StreamWindowLog): only a damaged or foreign stream asks for more memory.
func Stream(w io.Writer, r io.Reader) error {
	d, err := zstd.NewReader(bufio.NewReaderSize(r, 1<<20), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(1<<payload.StreamWindowLog))
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := io.Copy(w, d); err != nil {
		if errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return fmt.Errorf("%w: the payload's stream is packed with a window of at most 2^%d bytes", err, payload.StreamWindowLog)
		}
		return err
	}
	return nil
}

// Size reads the frame header at the start of r and returns the unpacked size it records, or an error
// saying why there is none (not a zstd stream, or one packed from a pipe, which records no size).
func Size(r io.Reader) (int64, error) {
	head := make([]byte, zstd.HeaderMaxSize)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, err
	}
	var h zstd.Header
	if err := h.Decode(head[:n]); err != nil {
		return 0, fmt.Errorf("not a zstd stream: %w", err)
	}
	if !h.HasFCS {
		return 0, errors.New("its zstd frame does not record the unpacked size")
	}
	return int64(h.FrameContentSize), nil
}
