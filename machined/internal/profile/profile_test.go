package profile

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	ctx := context.Background()
	var b bytes.Buffer
	if err := (Runtime{}).Write(ctx, Request{Name: "heap", GC: true, Debug: 1}, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "# HeapAlloc = ") {
		t.Errorf("heap profile in text lacks the runtime's memory statistics:\n%.300s", b.String())
	}
	b.Reset()
	if err := (Runtime{}).Write(ctx, Request{Name: "goroutine"}, &b); err != nil || b.Len() == 0 {
		t.Errorf("goroutine profile: %v, %d bytes", err, b.Len())
	}

	b.Reset()
	if err := (Runtime{}).Write(ctx, Request{Name: "metrics"}, &b); err != nil || !strings.Contains(b.String(), "/memory/classes/heap/objects:bytes ") {
		t.Errorf("metrics: %v, want the runtime's memory classes:\n%.300s", err, b.String())
	}

	// A CPU profile ends when the caller goes away, with what was sampled so far.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	b.Reset()
	if err := (Runtime{}).Write(cctx, Request{Name: "cpu", Seconds: 1}, &b); !errors.Is(err, context.Canceled) {
		t.Errorf("cpu profile of a cancelled call: %v, want context.Canceled", err)
	}

	var invalid interface{ InvalidArgument() }
	for _, r := range []Request{{Name: "nope"}, {Name: "heap", Debug: 3}, {Name: "cpu", Debug: 1}, {Name: "cpu", Seconds: 301}} {
		if err := (Runtime{}).Write(ctx, r, &b); !errors.As(err, &invalid) {
			t.Errorf("Write(%+v) = %v, want an invalid-argument error", r, err)
		}
	}
}

// TestMetricsKernelAccount: the metrics profile ends with the kernel's figures, the address line left out.
func TestMetricsKernelAccount(t *testing.T) {
	rollup := filepath.Join(t.TempDir(), "smaps_rollup")
	text := "00400000-7ffd1000 ---p 00000000 00:00 0                          [rollup]\nRss:               31840 kB\nAnonHugePages:      6144 kB\n"
	if err := os.WriteFile(rollup, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := (Runtime{SmapsRollup: rollup}).Write(context.Background(), Request{Name: "metrics"}, &b); err != nil {
		t.Fatal(err)
	}
	_, tail, _ := strings.Cut(b.String(), "# the kernel's account")
	if !strings.Contains(tail, "\nRss:               31840 kB\nAnonHugePages:      6144 kB\n") || strings.Contains(tail, "[rollup]") {
		t.Errorf("metrics profile ends with %q, want the rollup's figures without its address line", tail)
	}

	// Without the file the runtime's figures still come, with a line saying why the rest is missing.
	b.Reset()
	if err := (Runtime{SmapsRollup: filepath.Join(t.TempDir(), "none")}).Write(context.Background(), Request{Name: "metrics"}, &b); err != nil || !strings.Contains(b.String(), "no such file") {
		t.Errorf("metrics without smaps_rollup: %v\n%.200s", err, b.String())
	}
}

// TestMetricsMappings: the metrics profile lists the binary's mappings, those holding huge pages and
// those with 64 kB or more resident, and no other.
func TestMetricsMappings(t *testing.T) {
	dir := t.TempDir()
	smaps := filepath.Join(dir, "smaps")
	text := `00400000-00c00000 r--p 00000000 07:00 12 /sbin/machined
Size:               8192 kB
Rss:                3100 kB
Anonymous:             0 kB
00c00000-01800000 r-xp 00800000 07:00 12 /sbin/machined
Size:              12288 kB
Rss:                6400 kB
Anonymous:             0 kB
01800000-01900000 rw-p 01400000 07:00 12 /sbin/machined
Size:               1024 kB
Rss:                 300 kB
Anonymous:           120 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                1024 kB
Anonymous:          1024 kB
AnonHugePages:         0 kB
c000000000-c000400000 rw-p 00000000 00:00 0
Size:               4096 kB
Rss:                2100 kB
Anonymous:          2100 kB
AnonHugePages:      2048 kB
7f0000100000-7f0000200000 r-xp 00000000 07:00 40 /sbin/machined-old
Size:               1024 kB
Rss:                  60 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                  63 kB
Anonymous:            63 kB
AnonHugePages:         0 kB
`
	if err := os.WriteFile(smaps, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	r := Runtime{SmapsRollup: filepath.Join(dir, "none"), Smaps: smaps, Binary: "/sbin/machined"}
	if err := r.Write(context.Background(), Request{Name: "metrics"}, &b); err != nil {
		t.Fatal(err)
	}
	_, got, _ := strings.Cut(b.String(), "# mappings of /sbin/machined")
	_, got, _ = strings.Cut(got, "\n")
	want := "00400000-00c00000 r--p 00000000 /sbin/machined Size=8192 Rss=3100 Anonymous=0\n" +
		"00c00000-01800000 r-xp 00800000 /sbin/machined Size=12288 Rss=6400 Anonymous=0\n" +
		"01800000-01900000 rw-p 01400000 /sbin/machined Size=1024 Rss=300 Anonymous=120\n" +
		"7f0000000000-7f0000100000 rw-p 00000000 [anonymous] Size=1024 Rss=1024 Anonymous=1024 AnonHugePages=0\n" +
		"c000000000-c000400000 rw-p 00000000 [anonymous] Size=4096 Rss=2100 Anonymous=2100 AnonHugePages=2048\n"
	if got != want {
		t.Errorf("mappings:\n%s\nwant:\n%s", got, want)
	}
}
