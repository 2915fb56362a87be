package sys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FaultAround is the kernel's fault-around window: on a page fault in a file mapping (a program's code
// and read-only data, a mapped library) the kernel maps not only the page asked for but every page of
// the aligned window around it that is already in the page cache. Debian's kernel uses 64 KiB.
//
// Why machined sets it: a long-running process's resident memory then counts up to sixteen pages for
// each one it runs. machined, after its start-up pages are released (ReleaseImagePages), faults back in
// only what Running uses, and with a 64 KiB window about half of what came back was never run (measured
// 2026-12-01). The window is the kernel's only switch: madvise(MADV_RANDOM) does not turn it off for one
// mapping on a 6.1 kernel. The pages the window would map are in the page cache in any case; what the
// setting changes is that they are not mapped into a process, so they count in no process's RSS and stay
// as reclaimable as any clean page cache. The price is more minor faults (no I/O) where a program walks
// its code, paid at each program's start.
//
// The knob lives in debugfs (/sys/kernel/debug/fault_around_bytes); debugfs is mounted for the write and
// unmounted again, so no process keeps it.
type FaultAround struct {
	// Dir is where debugfs is mounted for the write (/sys/kernel/debug).
	Dir string
}

const faultAroundFile = "fault_around_bytes"

// Set writes the window in bytes (a power of two, at least a page; one page turns fault-around off) and
// returns the value it replaced.
func (f FaultAround) Set(bytes int) (int, error) {
	if bytes < os.Getpagesize() || bytes&(bytes-1) != 0 {
		return 0, fmt.Errorf("fault-around window %d: not a power of two of at least a page", bytes)
	}
	path := filepath.Join(f.Dir, faultAroundFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		debugfs := Mount{Source: "debugfs", Target: f.Dir, FSType: "debugfs", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, Data: "mode=0700"}
		if err := debugfs.Apply(); err != nil {
			return 0, err
		}
		defer Mounter{}.Unmount(f.Dir, true) //nolint:errcheck // the window is written; a debugfs left mounted is root's only
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s (a kernel without CONFIG_DEBUG_FS has no fault-around knob): %w", path, err)
	}
	prev, err := strconv.Atoi(strings.TrimSpace(string(old)))
	if err != nil {
		return 0, fmt.Errorf("read %s: %q is not a number", path, old)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(bytes)), 0o600); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return prev, nil
}
