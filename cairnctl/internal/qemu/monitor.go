package qemu

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// CPU is where one of a guest's vCPUs is, as QEMU's monitor shows it.
type CPU struct {
	N      int
	RIP    string // the instruction pointer, hex
	User   bool   // running user space (CPL 3), not the kernel
	Halted bool   // idle in HLT, waiting for an interrupt
}

func (c CPU) String() string {
	switch {
	case c.Halted:
		return fmt.Sprintf("CPU#%d halted (idle, waiting for an interrupt)", c.N)
	case c.User:
		return fmt.Sprintf("CPU#%d in user space at %s", c.N, c.RIP)
	default:
		return fmt.Sprintf("CPU#%d in the kernel at %s", c.N, c.RIP)
	}
}

// CPUs asks the running VM's monitor where its vCPUs are. It tells a guest that is idle waiting for an
// interrupt from one spinning in its kernel: the two ways a boot stops without a word on the console.
func (v *VM) CPUs(ctx context.Context) ([]CPU, error) {
	out, err := monitorCommand(ctx, filepath.Join(v.cfg.Dir, monitorSocket), "info registers -a")
	if err != nil {
		return nil, err
	}
	cpus := parseCPUs(out)
	if len(cpus) == 0 {
		return nil, fmt.Errorf("qemu monitor: no vCPU in the answer to `info registers -a`: %q", tailBytes(out, 200))
	}
	return cpus, nil
}

// prompt ends every answer of QEMU's human monitor.
const prompt = "(qemu) "

// monitorCommand sends one command to the human monitor at sock and returns what QEMU printed before
// its next prompt (with the monitor's echo of the command and its terminal escapes).
func monitorCommand(ctx context.Context, sock, cmd string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("qemu monitor: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var buf []byte
	// readUntil reads until the n-th prompt: the greeting ends with the first, the answer with the second.
	readUntil := func(n int) error {
		chunk := make([]byte, 4096)
		for bytes.Count(buf, []byte(prompt)) < n {
			k, err := conn.Read(chunk)
			buf = append(buf, chunk[:k]...)
			if err != nil {
				return fmt.Errorf("qemu monitor: %s: %w", cmd, err)
			}
		}
		return nil
	}
	if err := readUntil(1); err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte(cmd + "\n")); err != nil {
		return nil, fmt.Errorf("qemu monitor: %s: %w", cmd, err)
	}
	if err := readUntil(2); err != nil {
		return nil, err
	}
	first := bytes.Index(buf, []byte(prompt)) + len(prompt)
	return buf[first:bytes.LastIndex(buf, []byte(prompt))], nil
}

var (
	cpuRE = regexp.MustCompile(`(?m)^CPU#(\d+)\r?$`)
	ripRE = regexp.MustCompile(`RIP=([0-9a-f]+) .*CPL=(\d) .*HLT=([01])`)
)

// parseCPUs reads the vCPUs out of `info registers -a`: a "CPU#n" line opens each one's registers.
func parseCPUs(out []byte) []CPU {
	var cpus []CPU
	locs := cpuRE.FindAllSubmatchIndex(out, -1)
	for i, loc := range locs {
		end := len(out)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		n, _ := strconv.Atoi(string(out[loc[2]:loc[3]]))
		m := ripRE.FindSubmatch(out[loc[1]:end])
		if m == nil {
			continue
		}
		cpus = append(cpus, CPU{N: n, RIP: string(m[1]), User: string(m[2]) == "3", Halted: string(m[3]) == "1"})
	}
	return cpus
}

// CPUList is cpus in one line.
func CPUList(cpus []CPU) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = c.String()
	}
	return strings.Join(s, "; ")
}

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
