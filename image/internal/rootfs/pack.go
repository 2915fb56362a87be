package rootfs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/cairn-os/cairn/image/internal/tree"
)

// Why two images, machined's LZ4 and the rest zstd: both travel in the initramfs as they are (outside its
// zstd since 2026-12-06: initramfs.Write) and stay in RAM for the node's whole life, decompressed a block
// at a time as pages are read; the kernel copies them out of the initramfs before init runs, so every
// megabyte in them is paid at each boot. machined is read page by page while it starts, which under
// emulation is the API's first answer: LZ4 (high compression) decompresses several times faster than zstd
// on the emulated CPU. Packed all zstd (both images then under the initramfs's zstd), the initramfs was
// 17.5 MiB instead of 21.3 and init's line came 0.28 s sooner, but machined started 0.49 s later (first
// Status 4.81 s against 4.60 s, 7 boots each). The rest (modules, disk tools and their libraries) is read a
// file at a time (a module's load, a tool's start) and mostly after the first answer, so it is zstd: with
// machined apart, the initramfs went 20.4 → 19.4 MiB, init's line came 0.28 s sooner and the first Status
// 0.18 s sooner (7 boots each way, 2026-12-06, docs/figures.md). Its blocks stay at 128 KiB: the boot's
// module sets read a few small modules each, and 1 MiB blocks (18.7 MiB initramfs) made each read
// decompress up to a megabyte of its neighbours: the buses' and the NICs' sets took 195 and 134 ms against
// 147 and 95. Measured before on the single LZ4 image: an uncompressed image made the kernel unpack 63 MB
// instead of 26 (init started 0.72 s later) and machined started no faster; smaller blocks for machined (32
// or 16 KiB) did not help either.

// Compression is mksquashfs's compressor arguments.
type Compression []string

var (
	// MachinedCompression packs the machined image (MachinedTree).
	MachinedCompression = Compression{"-comp", "lz4", "-Xhc"}
	// RootCompression packs the root image (Build), in mksquashfs's default 128 KiB blocks.
	RootCompression = Compression{"-comp", "zstd", "-Xcompression-level", "19"}
)

// Pack stages t in stageDir and packs it into out as squashfs. All files are owned by root and carry
// the time epoch; mksquashfs sorts directories itself and is reproducible by default.
func Pack(ctx context.Context, t *tree.Tree, stageDir, out string, epoch int64, comp Compression) error {
	if err := os.RemoveAll(stageDir); err != nil {
		return err
	}
	defer os.RemoveAll(stageDir)
	if err := tree.Stage(t, stageDir); err != nil {
		return err
	}
	if err := os.Remove(out); err != nil && !os.IsNotExist(err) {
		return err
	}
	e := strconv.FormatInt(epoch, 10)
	args := []string{stageDir, out,
		"-noappend", "-reproducible", "-all-root", "-no-xattrs", "-exit-on-error",
		"-mkfs-time", e, "-all-time", e, "-quiet", "-no-progress"}
	cmd := exec.CommandContext(ctx, "mksquashfs", append(args, comp...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mksquashfs %s: %w: %s", out, err, b)
	}
	return nil
}
