package bootmedium

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/atomicfile"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/unpack"
)

// ErrUnpackLater is a search's answer when the ISO carries the payload as one stream (api/payload's
// ISOStream) and the search was given no Unpacker: the search a node makes in maintenance, before it has
// a volume to unpack onto. It is not a failure: Init, Join or the start unpack it.
var ErrUnpackLater = errors.New("the ISO carries the payload as one compressed stream, unpacked onto the EPHEMERAL volume when Init, Join or the start first mounts it")

// Unpacker puts the ISO's payload stream on a disk as an image file, which is then checked and mounted
// like the ISO's image file.
type Unpacker interface {
	// Unpack returns the image file of the payload the stream holds (want, which its header claims).
	Unpack(ctx context.Context, stream string, want payload.Record) (string, error)
}

// streamRecord reads the stream's frame header: the unpacked size it records says which of want it
// claims to be (the build's packings differ in size). What it is, dm-verity decides once it is unpacked.
func (f Finder) streamRecord(file string, want payload.Records) (rec payload.Record, why string) {
	r, err := f.Opener.Open(file)
	if err != nil {
		return rec, "cannot be read: " + err.Error()
	}
	defer r.Close()
	size, err := unpack.Size(io.NewSectionReader(r, 0, 1<<10))
	if err != nil {
		return rec, "holds no Cairn payload stream: " + err.Error()
	}
	for _, w := range want {
		if payload.StreamSize(w) == size {
			return w, ""
		}
	}
	return rec, fmt.Sprintf("holds a stream of another build's payload (%d bytes unpacked)", size)
}

// DirUnpacker unpacks the stream into a directory on the node's EPHEMERAL volume (api/payload's
// UnpackDir) and keeps the copy: a later boot of the same build mounts it again without unpacking, and
// an upgrade of the ISO (a new build) unpacks its own over it.
type DirUnpacker struct {
	Dir    string
	Opener inventory.Opener
	// Decode unpacks the stream src into dst, which it creates: unpack.File in a process of its own
	// (api/payload's UnpackHelper), whose memory the kernel takes back when it exits.
	Decode func(ctx context.Context, src, dst string) error
	// Format appends the dm-verity superblock and tree to an image file after its first dataSize bytes
	// (verity.Devices.Format): the stream does not carry the tree.
	Format func(ctx context.Context, image string, dataSize int64, salt, uuid string) error
	// Free is how many bytes the filesystem holding a directory has free (from sys.Statfs).
	Free func(dir string) (int64, error)
	// Every is how often progress is logged while it unpacks; zero is every 10 seconds.
	Every time.Duration
	Log   *slog.Logger
	// Progress, if set, is told what the log is (outcome "unpacking" or "unpacked", and a message), for
	// the events a running `cairnctl init` prints.
	Progress func(outcome, msg string)
}

func (u DirUnpacker) tell(outcome, msg string) {
	if u.Progress != nil {
		u.Progress(outcome, msg)
	}
}

// Unpack reuses a copy of want in Dir, or unpacks stream into it.
func (u DirUnpacker) Unpack(ctx context.Context, stream string, want payload.Record) (string, error) {
	dst := filepath.Join(u.Dir, payload.UnpackedFile)
	if _, err := os.Stat(dst); err == nil {
		_, why := checkImage(u.Opener, dst, payload.Records{want})
		if why == "" {
			u.Log.Info("payload: the copy an earlier boot unpacked is this build's", "file", dst)
			return dst, nil
		}
		u.Log.Info("payload: unpacking again", "file", dst, "because", "it "+why)
	}
	if err := os.MkdirAll(u.Dir, 0o700); err != nil {
		return "", err
	}
	part := dst + ".part"
	for _, p := range []string{dst, part} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	if free, err := u.Free(u.Dir); err != nil {
		return "", err
	} else if free < want.Size {
		return "", fmt.Errorf("unpacking the ISO's payload needs %d MiB free in %s, and it has %d MiB: give the EPHEMERAL volume a larger disk", want.Size>>20, u.Dir, free>>20)
	}
	start := time.Now()
	u.Log.Info("payload: unpacking the ISO's stream", "from", stream, "to", dst, "MiB", want.Size>>20)
	u.tell("unpacking", fmt.Sprintf("the ISO's payload stream, %d MiB, onto %s (once per build)", want.Size>>20, u.Dir))
	stop := u.progress(part, want.Size, start)
	err := u.Decode(ctx, stream, part)
	stop()
	if err != nil {
		_ = os.Remove(part)
		return "", fmt.Errorf("unpack %s into %s: %w", stream, part, err)
	}
	if err := u.rebuildTree(ctx, part, want); err != nil {
		_ = os.Remove(part)
		return "", fmt.Errorf("unpack %s: %w", stream, err)
	}
	if err := os.Rename(part, dst); err != nil {
		return "", err
	}
	if err := atomicfile.SyncDir(u.Dir); err != nil {
		return "", err
	}
	took := time.Since(start).Round(time.Millisecond)
	u.Log.Info("payload: unpacked", "file", dst, "took", took)
	u.tell("unpacked", fmt.Sprintf("%s in %v", dst, took))
	return dst, nil
}

// rebuildTree appends the dm-verity tree to what the stream unpacked to (the data and the superblock),
// with the superblock's salt and UUID: the tree the build made, whose root the search then checks.
func (u DirUnpacker) rebuildTree(ctx context.Context, part string, want payload.Record) error {
	fi, err := os.Stat(part)
	if err != nil {
		return err
	}
	if n := payload.StreamSize(want); fi.Size() != n {
		return fmt.Errorf("%d bytes came out, the record says %d", fi.Size(), n)
	}
	f, err := os.Open(part)
	if err != nil {
		return err
	}
	salt, uuid, err := payload.ReadSalt(f, want.Verity.DataSize)
	f.Close()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := u.Format(ctx, part, want.Verity.DataSize, salt, uuid); err != nil {
		return fmt.Errorf("rebuild its dm-verity tree: %w", err)
	}
	if fi, err = os.Stat(part); err != nil {
		return err
	} else if fi.Size() != want.Size {
		return fmt.Errorf("with its dm-verity tree it is %d bytes, the record says %d", fi.Size(), want.Size)
	}
	u.Log.Info("payload: dm-verity tree rebuilt", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// progress logs how far the unpacking is, every Every, until the returned func is called.
func (u DirUnpacker) progress(part string, total int64, start time.Time) (stop func()) {
	every := u.Every
	if every == 0 {
		every = 10 * time.Second
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if fi, err := os.Stat(part); err == nil {
					u.Log.Info("payload: unpacking", "MiB", fi.Size()>>20, "of", total>>20, "for", time.Since(start).Round(time.Second))
					u.tell("unpacking", fmt.Sprintf("%d of %d MiB", fi.Size()>>20, total>>20))
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}
