//go:build integration

package logs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

// A full EPHEMERAL (here a 1 MiB tmpfs filled to the last block): attaching the log files says why it
// cannot write, nothing panics or blocks, and the services' logs go on in memory.
func TestFilesOnAFullVolume(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tmpfs")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := filler.Write(chunk); err != nil {
			break // ENOSPC: full
		}
	}
	filler.Close()

	sup := supervisor.New(nil, nil)
	sup.Logs("machined").Add(strings.Repeat("a line from before the mount ", 200))
	fs := &Files{Dir: dir}
	err = fs.Attach(sup, "machined")
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("Attach() on a full volume = %v, want the lack of space named", err)
	}
	for i := 0; i < 1000; i++ {
		sup.Logs("machined").Add("still logging")
	}
	if got := sup.Logs("machined").Tail(1); len(got) != 1 || got[0].Text != "still logging" {
		t.Errorf("the ring after a full disk holds %+v, want the last line", got)
	}
	if err := fs.Detach(); err != nil && !strings.Contains(err.Error(), "no space left") {
		t.Errorf("Detach() = %v", err)
	}
}
