// Package verity opens the payload image through dm-verity: a read-only device-mapper device over the
// image whose every block the kernel checks, as it is read, against the root hash the root image
// records. A block that does not match fails its read (EIO) instead of reaching a process.
//
// veritysetup rather than the device-mapper ioctls: the image ships cryptsetup for an encrypted STATE
// (machined/internal/disk/crypt), and veritysetup is a small program over the same libraries, reading
// the superblock api/payload's layout puts before the hash tree.
package verity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cairn-os/cairn/api/payload"
)

// Runner runs a tool to completion (apply.ExecRunner); a non-zero exit is an error.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Devices opens and closes dm-verity devices.
type Devices struct {
	Runner Runner
	// MapperDir is where opened devices appear (/dev/mapper).
	MapperDir string
	// Prepare runs before a device is opened: the kernel modules, cryptsetup's lock directory (nil:
	// nothing).
	Prepare func(ctx context.Context) error
	// Open opens an opened device's node to read its first block (nil: os.Open).
	Open func(path string) (io.ReadCloser, error)
}

// Format appends the dm-verity superblock and tree to the image file after its first dataSize bytes, with
// the given salt and UUID (api/payload's FormatArgs): the tree of the ISO's payload stream, which does not
// carry it.
func (d Devices) Format(ctx context.Context, image string, dataSize int64, salt, uuid string) error {
	if d.Prepare != nil {
		if err := d.Prepare(ctx); err != nil {
			return fmt.Errorf("prepare for dm-verity: %w", err)
		}
	}
	_, err := d.Runner.Run(ctx, "veritysetup", payload.FormatArgs(image, dataSize, salt, uuid)...)
	return err
}

// ErrMismatch is an image whose first block dm-verity refused: its tree does not lead to the root hash
// asked for (another build's payload), or that block is damaged.
var ErrMismatch = errors.New("dm-verity refused its first block")

// OpenImage opens dev (an image laid out as api/payload's Verity says, the tree after the data) as the
// device-mapper device name, checked against v's root hash, and returns the device's path. It reads the
// first block through it before it returns, so an image of another build is refused here (ErrMismatch,
// with the device closed again) rather than at the mount.
func (d Devices) OpenImage(ctx context.Context, dev, name string, v payload.Verity) (string, error) {
	if d.Prepare != nil {
		if err := d.Prepare(ctx); err != nil {
			return "", fmt.Errorf("prepare for dm-verity: %w", err)
		}
	}
	mapped := filepath.Join(d.MapperDir, name)
	// A device of that name left by an earlier attempt (a search cut short) is closed first: veritysetup
	// refuses a name in use, and the old one may be over another image.
	if _, err := os.Stat(mapped); err == nil {
		if err := d.Close(ctx, name); err != nil {
			return "", err
		}
	}
	if _, err := d.Runner.Run(ctx, "veritysetup", "open", dev, name, dev, v.RootHash,
		"--hash-offset="+strconv.FormatInt(v.DataSize, 10)); err != nil {
		return "", fmt.Errorf("dm-verity over %s: %w", dev, err)
	}
	if err := d.readFirst(mapped); err != nil {
		if cerr := d.Close(ctx, name); cerr != nil {
			return "", errors.Join(fmt.Errorf("%s: %w: %v", dev, ErrMismatch, err), cerr)
		}
		return "", fmt.Errorf("%s: %w (root hash %s): %v", dev, ErrMismatch, v.RootHash, err)
	}
	return mapped, nil
}

func (d Devices) readFirst(path string) error {
	open := d.Open
	if open == nil {
		open = func(p string) (io.ReadCloser, error) { return os.Open(p) }
	}
	f, err := open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.ReadFull(f, make([]byte, payload.VerityBlock))
	return err
}

// Close removes the device-mapper device name.
func (d Devices) Close(ctx context.Context, name string) error {
	if _, err := d.Runner.Run(ctx, "veritysetup", "close", name); err != nil {
		return fmt.Errorf("close dm-verity device %s: %w", name, err)
	}
	return nil
}
