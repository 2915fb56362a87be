package proc

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// RSS is the resident memory of process pid in bytes (pid 0: this process), read from procfs; 0 when
// the process is gone or procfs does not say.
func RSS(pid int) uint64 {
	name := "self"
	if pid > 0 {
		name = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + name + "/status")
	if err != nil {
		return 0
	}
	return parseRSS(b)
}

// parseRSS reads the VmRSS line of /proc/PID/status ("VmRSS:     1234 kB").
func parseRSS(status []byte) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 3 && string(f[0]) == "VmRSS:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
