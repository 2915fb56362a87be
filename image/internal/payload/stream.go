package payload

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/cairn-os/cairn/api/payload"
)

// The ISO's payload stream (api/payload.ISOStream): the uncompressed packing (Config.Plain) without its
// dm-verity tree, as one zstd frame. Measured on 2026-12-07 against the payload's 64.9 MB squashfs:
//   - the uncompressed packing with `zstd --ultra -22 --long=27`: 48.6 MB with its tree, 46.7 MB without
//     (the tree is 1.9 MB of hashes, which do not compress; a node rebuilds it);
//   - the same with the largest file (the kube binary, 128 MB) packed last: 1.0 MB less. Every other
//     binary is then within the window's reach of it, so the code they share with it (the Go runtime,
//     gRPC, protobuf, the Kubernetes client libraries) is stored once;
//   - with --long=28 on top of that, 0.3 MB less, but a node then needs twice the memory to unpack it.
//
// A node unpacks it once, onto its EPHEMERAL volume, and rebuilds the tree from the superblock's salt
// (machined/internal/bootmedium).

// streamArgs are the zstd command's: its best level, a 2^27-byte window (so a node unpacks it in 128 MiB,
// and `zstd -d` takes it without --memory), two threads (the output depends on the thread count).
var streamArgs = []string{"--ultra", "-22", "--long=" + strconv.Itoa(streamWindowLog), "-T2", "--no-progress", "-q"}

// streamWindowLog is the window the stream is packed with: within what nodes accept.
const streamWindowLog = 27

var _ = [payload.StreamWindowLog - streamWindowLog]struct{}{} // a node must accept the stream's window

// Stream packs the image file plain (Config.Plain, whose record is rec) into out as the ISO's payload
// stream: its data and its dm-verity superblock (payload.StreamSize), not its tree. Unless the stamp
// beside out says it was packed from that image already: it takes minutes, the zstd command at its best
// level on one core.
func Stream(ctx context.Context, plain, out string, rec payload.Record, logf func(string, ...any)) error {
	n := payload.StreamSize(rec)
	// --stream-size writes the size into the frame's header, which a node reads before it unpacks.
	args := slices.Concat(streamArgs, []string{"--stream-size=" + strconv.FormatInt(n, 10)})
	stamp := out + ".stamp"
	want := rec.String() + "\n" + fmt.Sprint(args) + "\n"
	if old, err := os.ReadFile(stamp); err == nil && string(old) == want {
		if _, err := os.Stat(out); err == nil {
			logf("[payload] %s up to date", filepath.Base(out))
			return nil
		}
	}
	for _, p := range []string{stamp, out} {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	logf("[payload] packing %s, the ISO's payload as one zstd stream (about four minutes)", out)
	part := out + ".part"
	in, err := os.Open(plain)
	if err != nil {
		return err
	}
	defer in.Close()
	cmd := exec.CommandContext(ctx, "zstd", slices.Concat(args, []string{"-f", "-o", part})...)
	cmd.Stdin = io.LimitReader(in, n)
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(part)
		return fmt.Errorf("zstd %s: %w: %s", plain, err, b)
	}
	if err := os.Rename(part, out); err != nil {
		return err
	}
	return os.WriteFile(stamp, []byte(want), 0o644)
}

// largestLast writes a mksquashfs sort file (-sort) that places the tree's largest file after every
// other, and returns its path: the stream's window then reaches from it back to every other binary.
func largestLast(dir, sortFile string) error {
	var largest string
	var size int64 = -1
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Size() > size {
			largest, size = p, fi.Size()
		}
		return nil
	})
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, largest)
	if err != nil {
		return err
	}
	// mksquashfs places a higher priority first; every other file has 0.
	return os.WriteFile(sortFile, []byte(rel+" -1\n"), 0o644)
}
