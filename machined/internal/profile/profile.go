// Package profile writes machined's own runtime profiles (runtime/pprof) for the Profile RPC. A node has no
// shell and no port but the machine API's, so this is the one way to see what holds machined's memory or
// time on a real node; it costs nothing until it is called, since runtime/pprof is linked in anyway.
package profile

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Names are the profiles Write knows. "metrics" is not a pprof profile but the Go runtime's own
// accounting (runtime/metrics) as text: where the memory the process maps goes, heap or not (GC
// metadata, stacks, profiling buckets), which a heap profile does not show.
var Names = []string{"heap", "allocs", "goroutine", "threadcreate", "block", "mutex", "cpu", "metrics"}

// Limits of a CPU profile: long enough to catch a periodic task, short enough that a forgotten call does
// not keep the profiler (and its small sampling cost) running.
const (
	DefaultCPU = 10 * time.Second
	MaxCPU     = 300 * time.Second
)

// Request says which profile to write.
type Request struct {
	Name    string
	Seconds uint32 // cpu only; 0: DefaultCPU
	Debug   int    // 0: gzipped protobuf; 1, 2: pprof's text forms (not for cpu)
	GC      bool   // heap: collect first, so in-use figures count live objects only
}

// InvalidError is a request that names no profile or asks for one in a form it has not.
type InvalidError struct{ msg string }

func (e *InvalidError) Error() string { return e.msg }

// InvalidArgument marks the error for the API's error mapping.
func (e *InvalidError) InvalidArgument() {}

// BusyError is a CPU profile asked for while another one runs.
type BusyError struct{ err error }

func (e *BusyError) Error() string { return "another CPU profile is running: " + e.err.Error() }

// Precondition marks the error for the API's error mapping: try again once the other profile is done.
func (e *BusyError) Precondition() {}

// Runtime writes this process's profiles.
type Runtime struct {
	// SmapsRollup is the kernel's account of this process's memory, which "metrics" ends with;
	// empty: /proc/self/smaps_rollup.
	SmapsRollup string
	// Smaps is the same account by mapping, from which "metrics" adds the binary's own mappings and
	// those holding huge pages; empty: /proc/self/smaps.
	Smaps string
	// Binary is the executable whose mappings "metrics" lists; empty: this process's (os.Executable).
	Binary string
}

// Write writes the profile req names to w. A CPU profile samples for req.Seconds, or until ctx ends.
func (r Runtime) Write(ctx context.Context, req Request, w io.Writer) error {
	if !slices.Contains(Names, req.Name) {
		return &InvalidError{fmt.Sprintf("unknown profile %q: want one of %v", req.Name, Names)}
	}
	if req.Debug < 0 || req.Debug > 2 {
		return &InvalidError{fmt.Sprintf("debug %d: want 0 (pprof protobuf), 1 or 2 (text)", req.Debug)}
	}
	if req.Name == "metrics" {
		if err := writeMetrics(w); err != nil {
			return err
		}
		if err := r.writeSmaps(w); err != nil {
			return err
		}
		return r.writeMappings(w)
	}
	if req.Name == "cpu" {
		if req.Debug != 0 {
			return &InvalidError{"a cpu profile has no text form: use debug 0"}
		}
		return cpu(ctx, req.Seconds, w)
	}
	if req.GC && req.Name == "heap" {
		runtime.GC()
	}
	p := pprof.Lookup(req.Name)
	if p == nil {
		return &InvalidError{fmt.Sprintf("no profile %q in this runtime", req.Name)}
	}
	return p.WriteTo(w, req.Debug)
}

func cpu(ctx context.Context, seconds uint32, w io.Writer) error {
	d := time.Duration(seconds) * time.Second
	if d == 0 {
		d = DefaultCPU
	}
	if d > MaxCPU {
		return &InvalidError{fmt.Sprintf("%s of CPU profile: at most %s", d, MaxCPU)}
	}
	// Only one CPU profile runs at a time in a process.
	if err := pprof.StartCPUProfile(w); err != nil {
		return &BusyError{err}
	}
	defer pprof.StopCPUProfile()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeMetrics writes every runtime metric with a single value as "name value" lines; histograms are
// left out (pprof's profiles cover pauses and latencies better).
func writeMetrics(w io.Writer) error {
	descs := metrics.All()
	samples := make([]metrics.Sample, len(descs))
	for i, d := range descs {
		samples[i].Name = d.Name
	}
	metrics.Read(samples)
	bw := bufio.NewWriter(w)
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			fmt.Fprintf(bw, "%s %d\n", s.Name, s.Value.Uint64())
		case metrics.KindFloat64:
			fmt.Fprintf(bw, "%s %g\n", s.Name, s.Value.Float64())
		}
	}
	return bw.Flush()
}

// writeSmaps appends the kernel's side of the account: what of the process is resident, by kind. The
// runtime's figures say what Go mapped and uses; these say what the kernel counts against the process
// (the RSS a node reports), which differ by the binary's pages, huge pages backing a sparse heap, and
// the data segments.
func (r Runtime) writeSmaps(w io.Writer) error {
	name := r.SmapsRollup
	if name == "" {
		name = "/proc/self/smaps_rollup"
	}
	b, err := os.ReadFile(name)
	if err != nil {
		// Not every kernel has it (before 4.14): the runtime's figures above still stand.
		_, err = fmt.Fprintf(w, "# %s: %v\n", name, err)
		return err
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# the kernel's account (%s)\n", name)
	for line := range bytes.Lines(b) {
		// The first line names the address range, not a figure.
		if f := bytes.Fields(line); len(f) == 3 && bytes.HasSuffix(f[0], []byte(":")) {
			bw.Write(line)
		}
	}
	return bw.Flush()
}

// residentShown is the resident size from which writeMappings lists a mapping that is not the binary's.
const residentShown = 64 << 10

// writeMappings appends the binary's own mappings with what of each is resident (its code, its read-only
// data, with the tables the collector and the unwinder read, and its data segment), and every other
// mapping that holds transparent huge pages or at least residentShown of memory: the heap's arenas, the
// runtime's metadata and the binary's bss, which the runtime's own figures count as mapped, not resident.
// Pages of the binary are shared with the page cache, so they say which part of it the process keeps
// touching, not memory it alone holds; a huge page is private and mostly untouched in a small process,
// and the runtime's disablethp covers only its heap.
func (r Runtime) writeMappings(w io.Writer) error {
	name, bin := r.Smaps, r.Binary
	if name == "" {
		name = "/proc/self/smaps"
	}
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			_, err = fmt.Fprintf(w, "# the binary's mappings: %v\n", err)
			return err
		}
	}
	b, err := os.ReadFile(name)
	if err != nil {
		_, err = fmt.Fprintf(w, "# %s: %v\n", name, err)
		return err
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# mappings of %s, and others with huge pages or %d kB resident (%s): address range, permissions, offset, path, then kB\n", bin, residentShown>>10, name)
	// the mapping being read: address range, permissions, offset, path, and its figures. The range says
	// what an anonymous mapping is: the binary's bss follows its data segment, the heap's arenas are at
	// 0xc000000000, the runtime's other memory (metadata, profiling buckets) is mapped elsewhere.
	var cur []string
	show := false
	flush := func() {
		if show {
			fmt.Fprintln(bw, strings.Join(cur, " "))
		}
		cur, show = nil, false
	}
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			// A mapping's header: address range, permissions, offset, device, inode[, path].
			flush()
			path := "[anonymous]"
			if len(f) >= 6 {
				path = strings.Join(f[5:], " ")
			}
			cur, show = []string{f[0], f[1], f[2], path}, path == bin
		case len(f) == 3 && f[2] == "kB" && slices.Contains([]string{"Size:", "Rss:", "Anonymous:", "AnonHugePages:"}, f[0]):
			cur = append(cur, strings.TrimSuffix(f[0], ":")+"="+f[1])
			kb, _ := strconv.Atoi(f[1])
			show = show || (f[0] == "AnonHugePages:" && kb != 0) || (f[0] == "Rss:" && kb<<10 >= residentShown)
		}
	}
	flush()
	return bw.Flush()
}
