package qemu

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// testPorts stands in for the free ports New would pick.
var testPorts = map[int]int{APIPort: 40000, ProbePort: 40001, 6443: 40002}

func TestArgsGolden(t *testing.T) {
	base := Config{
		Name: "cp1", Dir: "/work/vm/cp1",
		Kernel: "/out/vmlinux", Initramfs: "/out/initramfs.cpio.zst", Payload: "/out/payload.squashfs", ISO: "/out/cairn.iso", Raw: "/out/cairn.raw",
		Cmdline: []string{"cairn.token=abc"},
		Disks:   []Disk{{Serial: "state", Size: 1 << 30}, {Serial: "ephemeral", Size: 8 << 30}},
	}
	l2 := &L2{Group: "230.0.0.1:5610", MAC: "52:54:00:12:34:56", Address: "10.5.0.11/24", Gateway: "10.5.0.1"}
	tests := []struct {
		golden string
		edit   func(*Config)
	}{
		{"vmlinux-microvm-default", func(c *Config) {}},
		{"vmlinux-q35-l2", func(c *Config) { c.Machine = MachineQ35; c.L2 = l2; c.Memory = 4096; c.CPUs = 4 }},
		{"vmlinux-q35-kernellog", func(c *Config) { c.Machine = MachineQ35; c.KernelLog = true; c.Cmdline = nil; c.Disks = nil }},
		{"iso-bios", func(c *Config) { c.Mode = ModeISO }},
		{"iso-uefi", func(c *Config) { c.Mode = ModeISO; c.UEFI = true; c.Cmdline = nil }},
		{"iso-uefi-disks-first", func(c *Config) { c.Mode = ModeISOUEFI }},
		{"iso-uefi-tpm", func(c *Config) { c.Mode = ModeISOUEFI; c.TPM = true }},
		{"raw", func(c *Config) { c.Mode = ModeRaw; c.L2 = l2 }},
		{"vmlinux-l2-address-from-platform", func(c *Config) {
			l := *l2
			l.Address = ""
			c.L2 = &l
		}},
		{"raw-metadata", func(c *Config) {
			c.Mode = ModeRaw
			c.L2 = l2
			c.Metadata = []string{"/usr/local/bin/cairnctl", "cluster", "imds", "--dir", "/work/vm/it's,here"}
		}},
		{"vmlinux-restarted-later", func(c *Config) {
			c.RTCBase = time.Date(2027, 9, 23, 10, 0, 0, 0, time.UTC)
			c.HostPorts = map[int]int{APIPort: 41000}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			c := base
			tt.edit(&c)
			c, err := c.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(args(c, testPorts, 2596124), "\n") + "\n"
			p := filepath.Join("testdata", tt.golden+".args")
			if *update {
				if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("%v (go test -update creates it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("args() (-want +got):\n%s", diff)
			}
			if !strings.Contains(got, "-accel\ntcg\n") {
				t.Errorf("args() lacks -accel tcg")
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	ok := Config{Name: "n", Dir: "/d", Kernel: "k", Initramfs: "i"}
	got, err := ok.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.Memory != 2048 || got.CPUs != 2 || got.Mode != ModeVmlinux || got.Machine != MachineMicrovm {
		t.Errorf("withDefaults() = %d MiB, %d CPUs, %s/%s; want 2048 MiB, 2 CPUs, vmlinux/microvm", got.Memory, got.CPUs, got.Mode, got.Machine)
	}
	bad := []struct {
		name string
		edit func(*Config)
	}{
		{"no name", func(c *Config) { c.Name = "" }},
		{"unknown mode", func(c *Config) { c.Mode = "pxe" }},
		{"unknown machine", func(c *Config) { c.Machine = "pc" }},
		{"iso without ISO", func(c *Config) { c.Mode = ModeISO }},
		{"raw without Raw", func(c *Config) { c.Mode = ModeRaw }},
		{"UEFI with vmlinux", func(c *Config) { c.UEFI = true }},
		{"duplicate serial", func(c *Config) { c.Disks = []Disk{{Serial: "a", Size: 1}, {Serial: "a", Size: 1}} }},
		{"serial boot is taken", func(c *Config) { c.Disks = []Disk{{Serial: "boot", Size: 1}} }},
		{"serial with a comma", func(c *Config) { c.Disks = []Disk{{Serial: "a,b", Size: 1}} }},
		{"zero-size disk", func(c *Config) { c.Disks = []Disk{{Serial: "a", Size: 0}} }},
		{"relative disk file", func(c *Config) { c.Disks = []Disk{{Serial: "a", File: "disk.raw"}} }},
		{"L2 bad address", func(c *Config) { c.L2 = &L2{Group: "230.0.0.1:1", MAC: "52:54:00:00:00:01", Address: "10.5.0.1"} }},
		{"L2 bad MAC", func(c *Config) { c.L2 = &L2{Group: "230.0.0.1:1", MAC: "nope", Address: "10.5.0.1/24"} }},
		{"negative nice", func(c *Config) { c.Nice = -1 }},
		{"nice above 19", func(c *Config) { c.Nice = 20 }},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			if _, err := c.withDefaults(); err == nil {
				t.Errorf("withDefaults() = nil error, want an error")
			}
		})
	}
}

// A disk given as an existing file is attached from that file, with the serial that selects it, and
// needs no size.
func TestDiskFile(t *testing.T) {
	c, err := Config{Name: "n", Dir: "/d", Kernel: "k", Initramfs: "i",
		Disks: []Disk{{Serial: "cairn-state", Size: 1 << 30}, {Serial: "cairn-etcd", File: "/tmp/foreign.raw"}}}.withDefaults()
	if err != nil {
		t.Fatalf("withDefaults() = %v", err)
	}
	got := strings.Join(args(c, testPorts, 0), " ")
	for _, want := range []string{
		"file=/d/disk-cairn-state.raw,if=none,id=disk0,", "serial=cairn-state",
		"file=/tmp/foreign.raw,if=none,id=disk1,", "drive=disk1,serial=cairn-etcd",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args() lacks %q:\n%s", want, got)
		}
	}
}

func TestParseCPUMHz(t *testing.T) {
	in := "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.124\ncache size\t: 512 KB\n"
	if got := parseCPUMHz(bufio.NewScanner(strings.NewReader(in))); got != 2596124 {
		t.Errorf("parseCPUMHz() = %d, want 2596124", got)
	}
	if got := parseCPUMHz(bufio.NewScanner(strings.NewReader("processor: 0\n"))); got != 0 {
		t.Errorf("parseCPUMHz(no MHz line) = %d, want 0", got)
	}
}

func TestNewPicksDistinctPorts(t *testing.T) {
	v, err := New(Config{Name: "n", Dir: t.TempDir(), Kernel: "k", Initramfs: "i", Ports: []int{6443, 50001, 6443}, TSCKHz: 1})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, g := range []int{APIPort, ProbePort, 6443, 50001} {
		p := v.HostPort(g)
		if p == 0 || seen[p] {
			t.Errorf("HostPort(%d) = %d, want a distinct free port", g, p)
		}
		seen[p] = true
	}
	if v.APIHostPort() != v.HostPort(APIPort) {
		t.Errorf("APIHostPort() = %d, want HostPort(50000) = %d", v.APIHostPort(), v.HostPort(APIPort))
	}
}

// A niceness runs QEMU through nice(1), so it applies from QEMU's first instruction to every thread.
func TestCommandNice(t *testing.T) {
	for _, tc := range []struct {
		nice int
		want []string
	}{
		{0, []string{"qemu-system-x86_64"}},
		{5, []string{"nice", "-n", "5", "qemu-system-x86_64"}},
	} {
		v, err := New(Config{Name: "n", Dir: t.TempDir(), Kernel: "k", Initramfs: "i", Nice: tc.nice, TSCKHz: 1})
		if err != nil {
			t.Fatal(err)
		}
		got := v.Command()
		if len(got) != len(tc.want)+len(v.Args()) || !slices.Equal(got[:len(tc.want)], tc.want) {
			t.Errorf("Nice %d: Command() starts %q, want %q then the arguments", tc.nice, got[:min(len(got), len(tc.want))], tc.want)
		}
	}
}

func TestKillWithoutPIDFile(t *testing.T) {
	if err := Kill(t.TempDir()); err != nil {
		t.Errorf("Kill(dir without qemu.pid) = %v, want nil", err)
	}
}

// A restarted node keeps the host ports its clients know; the others are picked free.
func TestNewKeepsHostPorts(t *testing.T) {
	v, err := New(Config{Name: "cp1", Dir: t.TempDir(), Kernel: "/out/vmlinux", Initramfs: "/out/initramfs.cpio.zst",
		Ports: []int{6443}, HostPorts: map[int]int{APIPort: 41000}})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.APIHostPort(); got != 41000 {
		t.Errorf("APIHostPort() = %d, want the pinned 41000", got)
	}
	if got := v.HostPort(6443); got == 0 || got == 41000 {
		t.Errorf("HostPort(6443) = %d, want a free port of its own", got)
	}
}

func TestTPMNeedsQ35(t *testing.T) {
	c := Config{Name: "n", Dir: "/d", Kernel: "/k", Initramfs: "/i", TPM: true}
	if _, err := c.withDefaults(); err == nil || !strings.Contains(err.Error(), "q35") {
		t.Errorf("a TPM on microvm = %v, want an error naming q35", err)
	}
}
