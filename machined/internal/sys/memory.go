package sys

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReleaseImagePages drops this process's page-table entries for the read-only mappings of its own
// executable (code and read-only data), and returns how many bytes were mapped before.
//
// Why: Go runs every linked package's init and machined's bring-up code once, touching pages all over a
// binary of tens of MB, and the kernel maps 64 KiB around each page touched (fault-around). Those pages
// then stay mapped, and counted in machined's resident memory, for the life of the process although most
// are never used again. Dropping the mappings leaves the pages in the page cache, clean and reclaimable
// like any file's; what machined still runs faults back in (a minor fault, no I/O) and stays.
//
// Only mappings without write permission are touched: MADV_DONTNEED on the writable data segment would
// throw away the program's variables.
func ReleaseImagePages() (uint64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	rss, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	file := statusKB(rss, "RssFile:")
	for _, m := range imageMappings(maps, exe) {
		// The range is this process's own mapping of its executable, read from /proc/self/maps just now;
		// nothing unmaps it while the process runs.
		if err := madviseRange(m.start, m.end-m.start, unix.MADV_DONTNEED); err != nil {
			return 0, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, err)
		}
	}
	return file, nil
}

type mapping struct{ start, end uintptr }

// imageMappings lists the mappings of file that are not writable, from /proc/PID/maps text
// ("start-end perms offset dev inode path").
func imageMappings(maps []byte, file string) []mapping {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 6 || string(f[5]) != file || len(f[1]) < 2 || f[1][1] == 'w' {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out
}

// statusKB reads a "Name:   1234 kB" line of /proc/PID/status, in bytes.
func statusKB(status []byte, name string) uint64 {
	for line := range bytes.Lines(status) {
		f := bytes.Fields(line)
		if len(f) == 3 && string(f[0]) == name {
			kb, _ := strconv.ParseUint(string(f[1]), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func madviseRange(addr, length uintptr, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, addr, length, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
