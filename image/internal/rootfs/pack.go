package rootfs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/cairn-os/cairn/image/internal/tree"
)

// Why squashfs with LZ4 (high compression): the root image is inside the initramfs, which is already
// zstd-compressed for download, and it stays in RAM for the node's whole life, decompressed a block at a
// time as pages are read. Measured on this root image (50 MB: machined, modules, disk tools): zstd level
// 6 makes 16.2 MB and LZ4-HC 20.3 MB in RAM, and both come to about 17-18 MB inside the compressed
// initramfs; LZ4 decompresses several times faster, which under emulation is machined's start (every
// page of its 25 MB binary that the Go runtime touches is decompressed by the emulated CPU). erofs
// (25.7 MB with lz4hc) and an uncompressed image would cost more RAM still. The uncompressed one was
// booted side by side with this one (bench, 2026-11-28, 5 rounds): its initramfs is smaller to download
// (16.1 against 20.6 MiB, since the outer zstd then compresses machined itself), but the kernel unpacks
// 63 MB instead of 26 before init runs (init started 0.72 s later) and machined started no faster (0.85
// against 0.84 s from exec to its first line): first Status 5.98 s against 5.08 s. Smaller blocks, so a
// first touch reads less, did not help either (same bench, 5 rounds): 32 KiB 5.09 s, 16 KiB 5.77 s,
// against 5.06 s with the default 128 KiB.

// Pack stages t in stageDir and packs it into out as squashfs. All files are owned by root and carry
// the time epoch; mksquashfs sorts directories itself and is reproducible by default.
func Pack(ctx context.Context, t *tree.Tree, stageDir, out string, epoch int64) error {
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
	cmd := exec.CommandContext(ctx, "mksquashfs", stageDir, out,
		"-noappend", "-reproducible", "-all-root", "-no-xattrs", "-exit-on-error",
		"-mkfs-time", e, "-all-time", e,
		"-comp", "lz4", "-Xhc",
		"-quiet", "-no-progress")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mksquashfs %s: %w: %s", out, err, b)
	}
	return nil
}
