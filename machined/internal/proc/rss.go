package proc

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// Memory is a process's resident memory in bytes.
type Memory struct {
	RSS  uint64 // all of it (VmRSS)
	Anon uint64 // private memory: heap, stacks (RssAnon)
	// File counts the pages of files the process maps, its own binary first (RssFile): page cache,
	// shared with every other mapping of the file and reclaimable by the kernel.
	File uint64
}

// RSS is the resident memory of process pid in bytes (pid 0: this process), read from procfs; 0 when
// the process is gone or procfs does not say.
func RSS(pid int) uint64 { return ResidentMemory(pid).RSS }

// ResidentMemory is the resident memory of process pid (pid 0: this process), read from procfs; zero
// when the process is gone or procfs does not say.
func ResidentMemory(pid int) Memory {
	name := "self"
	if pid > 0 {
		name = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + name + "/status")
	if err != nil {
		return Memory{}
	}
	return parseMemory(b)
}

// parseMemory reads the VmRSS, RssAnon and RssFile lines of /proc/PID/status ("VmRSS:     1234 kB").
func parseMemory(status []byte) Memory {
	var m Memory
	fields := map[string]*uint64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) != 3 || string(f[2]) != "kB" {
			continue
		}
		if dst, ok := fields[string(f[0])]; ok {
			if kb, err := strconv.ParseUint(string(f[1]), 10, 64); err == nil {
				*dst = kb << 10
			}
		}
	}
	return m
}
