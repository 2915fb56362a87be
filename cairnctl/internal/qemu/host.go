package qemu

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
)

// freePort asks the kernel for a free TCP port on 127.0.0.1. QEMU binds it a moment later; the race
// with other programs is accepted (QEMU then fails to start with a clear error).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// hostTSCKHz reads the host CPU's frequency from /proc/cpuinfo: under TCG the guest's TSC counts at the
// host's TSC rate. 0 if unknown.
func hostTSCKHz() int {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseCPUMHz(bufio.NewScanner(f))
}

func parseCPUMHz(s *bufio.Scanner) int {
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok || strings.TrimSpace(k) != "cpu MHz" {
			continue
		}
		mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || mhz <= 0 {
			return 0
		}
		return int(mhz * 1000)
	}
	return 0
}
