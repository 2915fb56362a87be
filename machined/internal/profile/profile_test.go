package profile

import (
	"bytes"
	"context"
	"errors"
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
