package qemu

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/info-registers-a.txt is what QEMU 7.2's monitor sent for `info registers -a` on a booted
// 2-vCPU microvm node: its greeting, the echo of the command with terminal escapes, the answer, the
// prompt.
func TestParseCPUs(t *testing.T) {
	sample, err := os.ReadFile("testdata/info-registers-a.txt")
	if err != nil {
		t.Fatal(err)
	}
	user := []byte("CPU#0\r\nRAX=0000000000000000\r\nRIP=000000000046a1c3 RFL=00000202 [-------] CPL=3 II=0 A20=1 SMM=0 HLT=0\r\n")
	tests := []struct {
		name string
		out  []byte
		want []CPU
	}{
		{"booted node", sample, []CPU{{N: 0, RIP: "ffffffff81a592eb", Halted: true}, {N: 1, RIP: "ffffffff819f6a07"}}},
		{"user space", user, []CPU{{N: 0, RIP: "000000000046a1c3", User: true}}},
		{"no vCPU", []byte("Error: unknown command\r\n"), nil},
		{"a vCPU without its registers", []byte("CPU#0\r\nRAX=0\r\n"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseCPUs(tt.out)); diff != "" {
				t.Errorf("parseCPUs() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if got, want := CPUList(parseCPUs(sample)), "CPU#0 halted (idle, waiting for an interrupt); CPU#1 in the kernel at ffffffff819f6a07"; got != want {
		t.Errorf("CPUList() = %q, want %q", got, want)
	}
}

// CPUs talks to the monitor as QEMU's does: a greeting and a prompt, then one answer per command line.
func TestCPUsAsksTheMonitor(t *testing.T) {
	sample, err := os.ReadFile("testdata/info-registers-a.txt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, monitorSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		greeting, answer, _ := bytes.Cut(sample, []byte(prompt))
		c.Write(append(greeting, prompt...))
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- line
		c.Write(answer)
	}()
	v := &VM{cfg: Config{Dir: dir}}
	cpus, err := v.CPUs(context.Background())
	if err != nil {
		t.Fatalf("CPUs() error: %v", err)
	}
	if line := <-got; line != "info registers -a\n" {
		t.Errorf("the monitor got %q, want `info registers -a`", line)
	}
	if len(cpus) != 2 || !cpus[0].Halted || cpus[1].Halted {
		t.Errorf("CPUs() = %v, want CPU#0 halted, CPU#1 running", cpus)
	}
	if _, err := (&VM{cfg: Config{Dir: t.TempDir()}}).CPUs(context.Background()); err == nil {
		t.Error("CPUs() of a VM without a monitor socket: no error")
	}
}

// A node directory too deep for a socket's address gets no monitor rather than a QEMU that will not start.
func TestMonitorOnlyWhereItsSocketFits(t *testing.T) {
	for _, tt := range []struct {
		dir  string
		want bool
	}{
		{"/root/.cairn/clusters/demo/nodes/demo-cp1", true},
		{"/" + strings.Repeat("d", maxSocketPath-len("/"+monitorSocket)-1), true},
		{"/" + strings.Repeat("d", maxSocketPath-len("/"+monitorSocket)), false},
	} {
		if got := slices.Contains(args(Config{Name: "n", Dir: tt.dir, Mode: ModeVmlinux}, nil, 0), "-monitor"); got != tt.want {
			t.Errorf("args() for a %d-byte socket path has -monitor = %v, want %v", len(tt.dir)+len("/"+monitorSocket), got, tt.want)
		}
	}
}
