package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
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

// A node whose kernel never runs init is hung too, though its quiet console says nothing: a CI run's
// microvm guest wrote nothing after its 0.44 s line ("PCI: Fatal: No config space access function
// found", which every microvm boot prints) for the whole 3-minute boot timeout. Under TCG the kernel
// runs Cairn's init 3-5 s after QEMU starts when QEMU loads it (vmlinux mode), ~10-30 s through
// firmware and a boot loader; these bounds are many times that, so a slow host is not taken for a hung
// kernel.
const (
	initWithinKernel   = 2 * time.Minute
	initWithinFirmware = 4 * time.Minute
)

// initLine begins every line Cairn's init writes (init/boot.go): on a quiet console, the first sign that
// the kernel has run user space.
const initLine = "cairn init: "

// hangWatch watches one node's console for its kernel hanging.
type hangWatch struct {
	Node    string
	Console string
	Offset  int64         // where the console of this boot starts
	Every   time.Duration // how often the console is read
	// Started is when QEMU started; with InitWithin > 0 the watch also ends the wait when no line from
	// init has come InitWithin after it.
	Started    time.Time
	InitWithin time.Duration
	// CPUs says where the VM's vCPUs are (qemu.VM.CPUs) and Network whether its TCP stack answers
	// (qemu.VM.NetworkAnswers): quoted when init never ran, to tell a stopped kernel from a stopped
	// console; nil: not asked.
	CPUs    func(context.Context) ([]qemu.CPU, error)
	Network func(context.Context) bool
}

// run polls the console until ctx ends and, when the kernel hangs, cancels ctx with an error wrapping
// ErrKernelHang that quotes the console line, or says that init never ran and where the vCPUs are.
func (w hangWatch) run(ctx context.Context, cancel context.CancelCauseFunc) {
	var carry []byte // a line the last read ended in the middle of
	offset, userSpace := w.Offset, w.InitWithin <= 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.Every):
		}
		// An unreadable console (not made yet) gives nothing and keeps the offset.
		data, _ := readFrom(w.Console, offset)
		offset += int64(len(data))
		data = append(carry, data...)
		complete := data
		carry = nil
		if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
			complete, carry = data[:i+1], bytes.Clone(data[i+1:])
		}
		if line := KernelHang(complete); line != "" {
			cancel(fmt.Errorf("node %s: %w: %q (console %s)", w.Node, ErrKernelHang, line, w.Console))
			return
		}
		userSpace = userSpace || bytes.Contains(complete, []byte(initLine))
		if !userSpace && time.Since(w.Started) >= w.InitWithin {
			cancel(fmt.Errorf("node %s: %w: no line from init on its console %v after QEMU started (console %s)%s",
				w.Node, ErrKernelHang, w.InitWithin, w.Console, w.guest(ctx)))
			return
		}
	}
}

// guest is what the monitor and a network probe say of a guest whose console is silent: where its vCPUs
// are, and whether its network answers (then user space runs, and it is the console that stopped).
func (w hangWatch) guest(ctx context.Context) string {
	var s string
	if w.CPUs != nil {
		if cpus, err := w.CPUs(ctx); err != nil {
			s = fmt.Sprintf("; its vCPUs unknown: %v", err)
		} else {
			s = "; its vCPUs: " + qemu.CPUList(cpus)
		}
	}
	if w.Network != nil {
		if w.Network(ctx) {
			s += "; its network answers: user space runs, its console stopped"
		} else {
			s += "; its network does not answer"
		}
	}
	return s
}

// withHang puts the hang that ended ctx, if one did, in front of err.
func withHang(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrKernelHang) {
		return fmt.Errorf("%w\n(what the wait saw: %v)", cause, err)
	}
	return err
}

// newHangWatch watches a VM that has just started, from the start of its console.
func newHangWatch(node string, vm *qemu.VM, mode qemu.Mode) hangWatch {
	w := hangWatch{Node: node, Console: vm.ConsolePath(), Every: 5 * time.Second, Started: vm.Started(),
		InitWithin: initWithinFirmware, CPUs: vm.CPUs, Network: vm.NetworkAnswers}
	if mode == qemu.ModeVmlinux {
		w.InitWithin = initWithinKernel
	}
	return w
}
