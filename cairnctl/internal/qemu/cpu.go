package qemu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on every Linux architecture this
// runs on (it is part of the kernel's ABI, whatever the kernel's own HZ).
const userHZ = 100

// CPUTime is the CPU time QEMU has used so far, user and system, all its threads. Under emulation a
// vCPU that is not idle is a host thread at work, so its growth over an interval, divided by the
// interval, is how many host cores the guest kept busy.
func (v *VM) CPUTime() (time.Duration, error) {
	v.mu.Lock()
	cmd := v.cmd
	v.mu.Unlock()
	if cmd == nil {
		return 0, errors.New("qemu: not started")
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("qemu %s: %w", v.cfg.Name, err)
	}
	return parseStatCPU(stat)
}

// parseStatCPU returns utime+stime of a /proc/PID/stat line. The command name (field 2) is in
// parentheses and may hold spaces or parentheses itself, so the fields are counted after its last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("qemu: /proc stat line without a command name")
	}
	// After the name: state (field 3), ... utime (field 14), stime (field 15).
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("qemu: /proc stat line has %d fields after the command name, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("qemu: /proc stat CPU time %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
