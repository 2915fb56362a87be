package sys

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

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

// mapsEntry is one line of /proc/PID/maps: "start-end perms offset dev inode [path]".
type mapsEntry struct {
	mapping
	perms, inode, path string
}

// parseMaps reads /proc/PID/maps text; lines it cannot read are skipped.
func parseMaps(maps []byte) []mapsEntry {
	var out []mapsEntry
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapsEntry{mapping{uintptr(start), uintptr(end)}, f[1], f[4], strings.Join(f[5:], " ")})
	}
	return out
}

// imageMappings lists the mappings of file that are not writable, from /proc/PID/maps text.
func imageMappings(maps []byte, file string) []mapping {
	var out []mapping
	for _, e := range parseMaps(maps) {
		if e.path == file && len(e.perms) >= 2 && e.perms[1] != 'w' {
			out = append(out, e.mapping)
		}
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
