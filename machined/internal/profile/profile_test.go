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
