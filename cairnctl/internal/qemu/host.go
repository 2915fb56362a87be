package qemu

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
)

// freePorts asks the kernel for n distinct free TCP ports on 127.0.0.1. Every listener stays open until
// all n are chosen: closed one by one, the kernel may hand the same port out twice (a VM was once given
// one host port for two guest ports, and QEMU refused to start). QEMU binds them a moment later; the
// race with other programs is accepted (QEMU then fails to start with a clear error).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
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
