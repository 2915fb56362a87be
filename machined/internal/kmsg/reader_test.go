package kmsg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/logring"
)

// fakeDev behaves as /dev/kmsg: one record per read, EPIPE where records were lost, a wait for the next
// record that a deadline or Close ends.
type fakeDev struct {
	mu       sync.Mutex
	recs     []string
	gen      func() string // when set, an endless kernel: every read has a record
	deadline time.Time
	closed   bool
	wake     chan struct{}
}

const lost = "EPIPE"

func newFakeDev(recs ...string) *fakeDev {
	return &fakeDev{recs: recs, wake: make(chan struct{}, 1)}
}

func (d *fakeDev) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *fakeDev) push(rec string) {
	d.mu.Lock()
	d.recs = append(d.recs, rec)
	d.mu.Unlock()
	d.poke()
}

func (d *fakeDev) Read(p []byte) (int, error) {
	for {
		d.mu.Lock()
		switch {
		case d.closed:
			d.mu.Unlock()
			return 0, os.ErrClosed
		case d.gen != nil:
			d.mu.Unlock()
			return copy(p, d.gen()), nil
		case len(d.recs) > 0:
			r := d.recs[0]
			d.recs = d.recs[1:]
			d.mu.Unlock()
			if r == lost {
				return 0, &os.PathError{Op: "read", Path: "kmsg", Err: syscall.EPIPE}
			}
			return copy(p, r), nil
		}
		dl := d.deadline
		d.mu.Unlock()
		var timeout <-chan time.Time
		if !dl.IsZero() {
			timeout = time.After(time.Until(dl))
		}
		select {
		case <-d.wake:
		case <-timeout:
			return 0, os.ErrDeadlineExceeded
		}
	}
}

func (d *fakeDev) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	d.deadline = t
	d.mu.Unlock()
	d.poke()
	return nil
}

func (d *fakeDev) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.poke()
	return nil
}

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// reader returns a Reader over dev on a machine up for 100 s at `now`.
func reader(t *testing.T, dev Device) *Reader {
	t.Helper()
	proc := t.TempDir()
	if err := os.WriteFile(filepath.Join(proc, "uptime"), []byte("100.00 50.00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &Reader{Path: "/dev/kmsg", ProcRoot: proc, Now: func() time.Time { return now }, Quiet: 20 * time.Millisecond,
		Open: func(string) (Device, error) { return dev, nil }}
}

func rec(seq, sec int, msg string) string { return fmt.Sprintf("6,%d,%d,-;%s\n", seq, sec*1e6, msg) }

type got struct {
	Time time.Time
	Line string
}

func TestDmesgTail(t *testing.T) {
	records := []string{rec(1, 1, "one"), lost, rec(5, 2, "five"), "not a record", rec(6, 3, "six"), rec(7, 4, "seven")}
	boot := now.Add(-100 * time.Second)
	tests := []struct {
		tail int
		want []got
	}{
		{0, []got{{boot.Add(time.Second), "kern.info: one"}, {boot.Add(2 * time.Second), "kern.info: five"},
			{boot.Add(3 * time.Second), "kern.info: six"}, {boot.Add(4 * time.Second), "kern.info: seven"}}},
		{2, []got{{boot.Add(3 * time.Second), "kern.info: six"}, {boot.Add(4 * time.Second), "kern.info: seven"}}},
		{1, []got{{boot.Add(4 * time.Second), "kern.info: seven"}}},
	}
	for _, tc := range tests {
		var lines []got
		err := reader(t, newFakeDev(records...)).Dmesg(context.Background(), tc.tail, false, func(l logring.Record) error {
			if l.Service != "kernel" {
				t.Errorf("line of service %q, want kernel", l.Service)
			}
			lines = append(lines, got{l.Time, l.Line})
			return nil
		})
		if err != nil {
			t.Fatalf("Dmesg(tail %d) = %v", tc.tail, err)
		}
		if diff := cmp.Diff(tc.want, lines); diff != "" {
			t.Errorf("Dmesg(tail %d) mismatch (-want +got):\n%s", tc.tail, diff)
		}
	}
}

func TestDmesgFollow(t *testing.T) {
	dev := newFakeDev(rec(1, 1, "kept"))
	ctx, cancel := context.WithCancel(context.Background())
	lines := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- reader(t, dev).Dmesg(ctx, 0, true, func(l logring.Record) error { lines <- l.Line; return nil })
	}()
	want := []string{"kern.info: kept", "kern.info: new one", "kern.info: after a loss"}
	dev.push(rec(2, 150, "new one"))
	dev.push(lost)
	dev.push(rec(9, 151, "after a loss"))
	for _, w := range want {
		select {
		case l := <-lines:
			if l != w {
				t.Fatalf("followed line %q, want %q", l, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no line %q within 5s", w)
		}
	}
	cancel()
	waitFollowEnded(t, done)
}

// waitFollowEnded checks that a followed Dmesg, whose context was just cancelled, ends without error.
func waitFollowEnded(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Dmesg(follow) after cancel = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Dmesg(follow) kept waiting for a record after its context ended")
	}
}

// A kernel that never stops logging still gets an answer: the kept records end at the first one logged
// after the call began.
func TestDmesgTailOfAnEndlessLog(t *testing.T) {
	dev := newFakeDev()
	seq := 0
	dev.gen = func() string { seq++; return rec(seq, 95+seq, fmt.Sprint("record ", seq)) } // 96 s, 97 s, ... past the uptime
	var lines []string
	done := make(chan error, 1)
	go func() {
		done <- reader(t, dev).Dmesg(context.Background(), 0, false, func(l logring.Record) error {
			lines = append(lines, l.Line)
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Dmesg(tail) of an endless log did not return")
	}
	// Up 100 s, with a second of margin for the uptime's resolution: records up to 101 s.
	want := []string{"kern.info: record 1", "kern.info: record 2", "kern.info: record 3", "kern.info: record 4",
		"kern.info: record 5", "kern.info: record 6"}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("Dmesg mismatch (-want +got):\n%s", diff)
	}
}

func TestDmesgUnreadable(t *testing.T) {
	r := &Reader{Path: filepath.Join(t.TempDir(), "kmsg"), ProcRoot: "/proc"}
	err := r.Dmesg(context.Background(), 0, false, func(logring.Record) error { return nil })
	var ue *UnreadableError
	if !errors.As(err, &ue) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), r.Path) {
		t.Fatalf("Dmesg(missing device) = %v, want an UnreadableError naming %s", err, r.Path)
	}
	var marker interface{ Precondition() }
	if !errors.As(err, &marker) {
		t.Errorf("%T has no Precondition() marker for the API", err)
	}
}

// The host's own /dev/kmsg, where this process may read it: the device really hands out one record per
// read and the kept ones end.
func TestDmesgHostDevice(t *testing.T) {
	f, err := os.Open("/dev/kmsg")
	if err != nil {
		t.Skipf("the host's kernel log is not readable here: %v", err)
	}
	f.Close()
	r := &Reader{Path: "/dev/kmsg", ProcRoot: "/proc"}
	var lines []logring.Record
	start := time.Now()
	err = r.Dmesg(context.Background(), 5, false, func(l logring.Record) error { lines = append(lines, l); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || len(lines) > 5 {
		t.Fatalf("Dmesg(tail 5) of the host sent %d lines, want 1 to 5", len(lines))
	}
	for _, l := range lines {
		if l.Time.After(time.Now().Add(time.Second)) || !strings.Contains(l.Line, ": ") {
			t.Errorf("line %+v: want a time not in the future and FACILITY.LEVEL: MESSAGE", l)
		}
	}
	t.Logf("tail 5 of the host's kernel log in %v; last: %s %s", time.Since(start), lines[len(lines)-1].Time.Format(time.RFC3339), lines[len(lines)-1].Line)
}
