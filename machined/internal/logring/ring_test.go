package logring

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRingKeepsTheLastLines(t *testing.T) {
	r := New()
	for i := 0; i < Lines+5; i++ {
		r.Add(strings.Repeat("x", i%3))
	}
	if got := len(r.Tail(0)); got != Lines {
		t.Fatalf("kept %d lines, want %d", got, Lines)
	}
	if got := r.Tail(2); len(got) != 2 {
		t.Fatalf("Tail(2) = %d lines", len(got))
	}
	r.Add(strings.Repeat("y", MaxLine+10))
	last := r.Tail(1)[0].Text
	if len(last) > MaxLine+len("…") || !strings.HasSuffix(last, "…") {
		t.Errorf("an over-long line was kept as %d bytes, want it cut at %d with a mark", len(last), MaxLine)
	}
}

func TestFollowAndSink(t *testing.T) {
	r := New()
	r.Add("before")
	var sink bytes.Buffer
	r.SetSink(&sink)
	hist, ch, cancel := r.Follow(0)
	defer cancel()
	w := r.Writer()
	w.Write([]byte("one\ntwo\npartial"))
	w.Close()
	var got []string
	timeout := time.After(2 * time.Second)
	for len(got) < 3 {
		select {
		case l := <-ch:
			got = append(got, l.Text)
		case <-timeout:
			t.Fatalf("followed %v, want one, two, partial", got)
		}
	}
	if len(hist) != 1 || hist[0].Text != "before" || strings.Join(got, ",") != "one,two,partial" {
		t.Errorf("history %v, followed %v", hist, got)
	}
	if s := sink.String(); !strings.Contains(s, " one\n") || strings.Contains(s, "before") {
		t.Errorf("sink got %q: want the lines after SetSink only", s)
	}
}

func TestSlowFollowerDoesNotBlock(t *testing.T) {
	r := New()
	_, _, cancel := r.Follow(0)
	defer cancel()
	done := make(chan struct{})
	go func() {
		for i := 0; i < 5000; i++ {
			r.Add("line")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Add blocked on a follower that does not read")
	}
}
