package boot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// GCEName is the file inside a GCE image tarball: Compute Engine imports a gzipped tar holding one
// disk image named disk.raw.
const GCEName = "disk.raw"

// GCETarball packs the raw disk image as Compute Engine imports it (`gcloud compute images create
// --source-uri gs://.../cairn-gce.tar.gz`): a GNU tar of the old format with the disk stored sparse, so
// the 4 GiB disk costs its ~100 MiB of data, gzipped. GNU tar writes the sparse map (Go's archive/tar
// reads sparse files but does not write them). Fixed owner, mode time and gzip header keep it
// reproducible. It is written beside out and renamed.
func GCETarball(ctx context.Context, raw, out string, epoch int64) error {
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	tar := exec.CommandContext(ctx, "tar", "--format=oldgnu", "--sparse", "--owner=0", "--group=0", "--numeric-owner",
		"--mtime=@"+strconv.FormatInt(epoch, 10), "--transform=s,.*,"+GCEName+",",
		"-C", filepath.Dir(raw), "-cf", "-", filepath.Base(raw))
	gz := exec.CommandContext(ctx, "gzip", "-n", "-c")
	pipe, err := tar.StdoutPipe()
	if err != nil {
		return err
	}
	gz.Stdin, gz.Stdout = pipe, f
	var tarErr, gzErr stderrBuf
	tar.Stderr, gz.Stderr = &tarErr, &gzErr
	if err := gz.Start(); err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	if err := tar.Run(); err != nil {
		gz.Wait()
		return fmt.Errorf("tar %s: %w: %s", raw, err, tarErr)
	}
	if err := gz.Wait(); err != nil {
		return fmt.Errorf("gzip: %w: %s", err, gzErr)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// stderrBuf keeps the end of a tool's standard error for its error message.
type stderrBuf []byte

func (b *stderrBuf) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	if len(*b) > 2000 {
		*b = (*b)[len(*b)-2000:]
	}
	return len(p), nil
}

func (b stderrBuf) String() string { return string(b) }
