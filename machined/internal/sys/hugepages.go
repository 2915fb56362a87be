package sys

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Transparent huge pages and machined. Debian's kernel backs every anonymous mapping with 2 MiB pages
// where it can (THP "always"). The Go runtime's GODEBUG=disablethp=1 keeps them off its heap, but not off
// the memory it maps beside the heap: span and GC metadata, the profiler's bucket table, its other
// persistent allocations. Those are many small mmaps, which the kernel merges into one mapping of a few
// MiB, and a 2 MiB page there made 2 MiB of machined's anonymous memory at once, mostly untouched
// (measured 2026-12-02: one such page in a 4.2 MiB mapping, 0.9 MiB of anonymous memory more than with
// THP off for the whole node).
//
// init switches THP off for the process before it execs machined (PR_SET_THP_DISABLE, which the kernel
// keeps across exec), so the runtime's start gets none. machined then marks its mappings (NoHugePages)
// and switches the process flag back on (AllowHugePages) before it starts anything: the flag is also
// inherited by every child, and the node's workloads keep the kernel's policy.

// NoHugePages marks every private, writable anonymous mapping of this process MADV_NOHUGEPAGE, so the
// kernel neither faults a huge page into it nor collapses its pages into one later, and returns how many
// mappings it marked. A page already huge stays so; mappings made after the call are not marked (the
// runtime's heap is, by disablethp; call it again for the rest).
func NoHugePages() (int, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range anonMappings(maps) {
		// The range is a mapping of this process read from /proc/self/maps just now. One the runtime has
		// unmapped since fails with ENOMEM and is skipped; advice sets a flag and never touches data.
		if err := madviseRange(m.start, m.end-m.start, unix.MADV_NOHUGEPAGE); err != nil {
			if err == unix.ENOMEM {
				continue
			}
			return n, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, err)
		}
		n++
	}
	return n, nil
}

// AllowHugePages clears this process's PR_SET_THP_DISABLE flag, so that it and every process it starts
// from now on get the kernel's huge-page policy, and reports whether the flag was set.
func AllowHugePages() (bool, error) {
	was, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0)
	if err != nil {
		return false, fmt.Errorf("prctl PR_GET_THP_DISABLE: %w", err)
	}
	if was == 0 {
		return false, nil
	}
	if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 0, 0, 0, 0); err != nil {
		return true, fmt.Errorf("prctl PR_SET_THP_DISABLE 0: %w", err)
	}
	return true, nil
}

// anonMappings lists the private, writable mappings backed by no file, from /proc/PID/maps text: those
// without a path, the brk heap and those a program named ([anon:NAME]). The stack and the kernel's own
// ([stack], [vdso], [vvar], [vsyscall]) are left out, and so are reservations without access (the
// runtime's PROT_NONE address space), which hold no page.
func anonMappings(maps []byte) []mapping {
	var out []mapping
	for _, e := range parseMaps(maps) {
		if e.inode != "0" || len(e.perms) != 4 || e.perms[1] != 'w' || e.perms[3] != 'p' {
			continue
		}
		if e.path == "" || e.path == "[heap]" || strings.HasPrefix(e.path, "[anon:") {
			out = append(out, e.mapping)
		}
	}
	return out
}
