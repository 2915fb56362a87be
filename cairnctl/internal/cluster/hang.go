package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// A guest kernel that panics, or reports a CPU stuck for minutes, will not finish a boot or a sequence.
// Under TCG on a busy host a soft lockup of tens of seconds happens and passes; one of minutes has not
// been seen to recover (a CI run: both vCPUs stuck in the kernel for 27 minutes, while create waited for
// its 30-minute timeout). create watches every node's console and ends its waits with the kernel's own
// words instead.
var (
	softLockupRE  = regexp.MustCompile(`soft lockup - CPU#\d+ stuck for (\d+)s!`)
	kernelPanicRE = regexp.MustCompile(`Kernel panic - not syncing`)
)

// hangAfter is how long a CPU may be reported stuck before the node counts as hung.
const hangAfter = 3 * time.Minute

// ErrKernelHang marks an error caused by a node's guest kernel hanging or panicking.
var ErrKernelHang = errors.New("the guest kernel hung")

// KernelHang returns the first console line that shows the guest kernel panicked or has had a CPU stuck
// for hangAfter or longer, "" if there is none.
func KernelHang(console []byte) string {
	for line := range bytes.Lines(console) {
		if kernelPanicRE.Match(line) {
			return string(bytes.TrimSpace(line))
		}
		if m := softLockupRE.FindSubmatch(line); m != nil {
			if s, err := strconv.Atoi(string(m[1])); err == nil && time.Duration(s)*time.Second >= hangAfter {
				return string(bytes.TrimSpace(line))
			}
		}
	}
	return ""
}

// watchHang polls a node's console from offset until ctx ends and, when its kernel hangs, cancels
// ctx with an error wrapping ErrKernelHang that quotes the console line.
func watchHang(ctx context.Context, cancel context.CancelCauseFunc, node, path string, offset int64, every time.Duration) {
	var carry []byte // a line the last read ended in the middle of
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		// An unreadable console (not made yet) gives nothing and keeps the offset.
		data, _ := readFrom(path, offset)
		offset += int64(len(data))
		data = append(carry, data...)
		complete := data
		carry = nil
		if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
			complete, carry = data[:i+1], bytes.Clone(data[i+1:])
		}
		if line := KernelHang(complete); line != "" {
			cancel(fmt.Errorf("node %s: %w: %q (console %s)", node, ErrKernelHang, line, path))
			return
		}
	}
}

// withHang puts the hang that ended ctx, if one did, in front of err.
func withHang(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrKernelHang) {
		return fmt.Errorf("%w\n(what the wait saw: %v)", cause, err)
	}
	return err
}
