package rootfs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/cairn-os/cairn/image/internal/tree"
)

// Why squashfs with zstd: measured here on 50 MB of Go binaries plus modules, squashfs-zstd (level 6,
// 128 KiB blocks) is 17.5 MB in 1 s, while erofs is 25.7 MB even with lz4hc, the best Debian's erofs
// module can read (no LZMA). The image lives in RAM for the node's whole life, so the smaller one wins;
// squashfs decompresses only the blocks that are read. Level 19 saves 10% more but takes 25x longer.
const zstdLevel = 6

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
		"-comp", "zstd", "-Xcompression-level", strconv.Itoa(zstdLevel),
		"-quiet", "-no-progress")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mksquashfs %s: %w: %s", out, err, b)
	}
	return nil
}
