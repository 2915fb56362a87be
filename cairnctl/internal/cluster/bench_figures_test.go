//go:build bench

package cluster

// The bench's figures: every measurement is collected as a row, then printed as one table and written as
// JSON under _out/bench/, so a new figure is one call to add or series and shows up in both.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// figure is one row of the table: a single value, or a series of samples summarised as median [min–max].
type figure struct {
	Name string `json:"name"`
	Unit string `json:"unit"` // s, ms, MiB, x (a ratio)
	// Samples are every measurement in the order taken; empty for a single value.
	Samples []float64 `json:"samples,omitempty"`
	Median  float64   `json:"median"` // the value itself when there are no samples
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	// Target is the target, shown beside the figure for the reader: the bench never asserts it.
	Target string `json:"target,omitempty"`
	Note   string `json:"note,omitempty"`
}

// stamp is one console line and when the host saw it, counted from QEMU's start.
type stamp struct {
	At float64 `json:"at"` // seconds
	// CPU is the CPU time QEMU had used by then, in seconds (qemu.VM.CPUTime): with one vCPU, its growth
	// between two lines over their distance is how busy the guest was in between, and what is not busy is
	// waiting (a driver's probe, a timer) that other work could have used.
	CPU  float64 `json:"cpu,omitempty"`
	Line string  `json:"line"`
}

// figures is the whole run.
type figures struct {
	Started time.Time `json:"started"`
	Commit  string    `json:"commit"`
	Machine string    `json:"machine"`
	// Kernel is the booted kernel's version banner: Debian's, or make kernel's (KERNEL_ROOT).
	Kernel string   `json:"kernel"`
	Rows   []figure `json:"rows"`
	Sizes  []size   `json:"sizes"`
	// Timelines are the consoles of chosen boots (the median Cairn boot, the median floor boot), stamped.
	Timelines map[string][]stamp `json:"timelines,omitempty"`
}

type size struct {
	Name string  `json:"name"`
	MiB  float64 `json:"mib"`
	Note string  `json:"note,omitempty"`
}

// add records a single value.
func (f *figures) add(name, unit string, v float64, target, note string) {
	f.Rows = append(f.Rows, figure{Name: name, Unit: unit, Median: v, Min: v, Max: v, Target: target, Note: note})
}

// series records samples and returns their median.
func (f *figures) series(name, unit string, samples []float64, target, note string) float64 {
	if len(samples) == 0 {
		f.Rows = append(f.Rows, figure{Name: name, Unit: unit, Target: target, Note: "no samples: " + note})
		return 0
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	r := figure{Name: name, Unit: unit, Samples: samples, Median: medianOf(s), Min: s[0], Max: s[len(s)-1], Target: target, Note: note}
	f.Rows = append(f.Rows, r)
	return r.Median
}

// medianOf takes sorted values; for an even count, the mean of the middle two.
func medianOf(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func (f *figures) print(w io.Writer) {
	fmt.Fprintf(w, "\n%s\nkernel: %s\ncommit %s, %s\n\n", f.Machine, f.Kernel, f.Commit, f.Started.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmedian\t[min–max]\tn\ttarget\t")
	for _, r := range f.Rows {
		spread, n := "", ""
		if len(r.Samples) > 0 {
			spread, n = fmt.Sprintf("[%s–%s]", num(r.Min), num(r.Max)), fmt.Sprint(len(r.Samples))
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\t\n", r.Name, num(r.Median), r.Unit, spread, n, r.Target)
	}
	tw.Flush()
	for _, r := range f.Rows {
		if r.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Name, r.Note)
		}
	}
	if len(f.Sizes) > 0 {
		fmt.Fprintln(w, "\nsizes:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, s := range f.Sizes {
			fmt.Fprintf(tw, "  %s\t%8.1f MiB\t%s\n", s.Name, s.MiB, s.Note)
		}
		tw.Flush()
	}
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// write stores the figures as dir/bench-TIME.json and dir/latest.json, and returns the first's path.
func (f *figures) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "bench-"+f.Started.UTC().Format("20060102T150405Z")+".json")
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		return "", err
	}
	return p, os.WriteFile(filepath.Join(dir, "latest.json"), append(b, '\n'), 0o644)
}

func gitCommit(repo string) string {
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// hostInfo describes the host: CPU, cores, RAM, QEMU and the load when the bench started (a busy host
// slows every emulated boot; the floor measured in the same run is what makes the figures comparable).
func hostInfo() string {
	model := "unknown"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var si syscall.Sysinfo_t
	_ = syscall.Sysinfo(&si)
	qv, _ := exec.Command("qemu-system-x86_64", "--version").Output()
	first, _, _ := strings.Cut(string(qv), "\n")
	return fmt.Sprintf("machine: %s, %d cores, %.1f GiB RAM, %s, load %s; QEMU runs with -accel tcg (emulation) -cpu %s: KVM hangs on this machine class",
		model, runtime.NumCPU(), float64(si.Totalram)*float64(si.Unit)/(1<<30), first, loadAvg(), qemu.CPUModel)
}

// kernelVersion is the release in the version banner inside the image's vmlinux ("Linux version
// 6.1.0-56-amd64 (debian-kernel@...) ..." gives 6.1.0-56-amd64): which kernel the figures are of.
func kernelVersion(vmlinux string) string {
	b, err := os.ReadFile(vmlinux)
	if err != nil {
		return "unknown: " + err.Error()
	}
	i := bytes.Index(b, []byte("Linux version "))
	if i < 0 {
		return "unknown: no version banner in " + vmlinux
	}
	line, _, _ := bytes.Cut(b[i+len("Linux version "):], []byte("\n"))
	v, _, _ := strings.Cut(string(bytes.TrimRight(line, "\x00")), " (")
	return v
}

func loadAvg() string {
	load, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(load)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// sizes lists each artifact's size (for sparse files the blocks they really take) and the bundle's.
func sizes(dir string) []size {
	var out []size
	for _, f := range []string{"vmlinuz", "vmlinux", "initramfs.cpio.zst", "rootfs.squashfs", "machined.squashfs", "payload.squashfs", "payload-plain.squashfs", "cairn.iso", "cairn.raw", "cairn.raw.zst", "init", "machined", "cairnctl"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			note := "missing"
			if f == "cairn.raw.zst" {
				note = "missing: make size writes it"
			}
			out = append(out, size{Name: f, Note: note})
			continue
		}
		s := size{Name: f, MiB: float64(fi.Size()) / (1 << 20)}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 < fi.Size()*9/10 {
			s.Note = fmt.Sprintf("%.1f MiB allocated: sparse", float64(st.Blocks*512)/(1<<20))
		}
		out = append(out, s)
	}
	var bundle int64
	_ = filepath.Walk(filepath.Join(dir, "bundle"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			bundle += fi.Size()
		}
		return nil
	})
	return append(out, size{Name: "bundle/", MiB: float64(bundle) / (1 << 20), Note: "Kubernetes images, containerd, runc, CNI plugins"})
}

func sizeMiB(p string) float64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return float64(fi.Size()) / (1 << 20)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
