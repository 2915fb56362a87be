package logring

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRingKeepsTheLastLines(t *testing.T) {
	r := New()
	const lines = 3 * Budget / 100 // well over what the budget holds
	for i := 0; i < lines; i++ {
		r.Add(fmt.Sprintf("%06d %s", i, strings.Repeat("x", i%90)))
	}
	kept := r.Tail(0)
	size := 0
	for i, l := range kept {
		size += header + len(l.Text)
		if want := fmt.Sprintf("%06d", lines-len(kept)+i); !strings.HasPrefix(l.Text, want) {
			t.Fatalf("line %d of %d kept is %.6q, want %s: the ring must keep the last lines in order", i, len(kept), l.Text, want)
		}
	}
	if size > Budget || size < Budget-2*chunkSize {
		t.Errorf("kept %d bytes of lines, want between %d and the budget, %d", size, Budget-2*chunkSize, Budget)
	}
	if got := r.Tail(2); len(got) != 2 || got[1].Text != kept[len(kept)-1].Text {
		t.Fatalf("Tail(2) = %d lines, want the last 2", len(got))
	}
	r.Add(strings.Repeat("y", MaxLine+10))
	last := r.Tail(1)[0].Text
	if len(last) > MaxLine+len("…") || !strings.HasSuffix(last, "…") {
		t.Errorf("an over-long line was kept as %d bytes, want it cut at %d with a mark", len(last), MaxLine)
	}
}

func TestConsumeCutsLongLinesAndGoesOn(t *testing.T) {
	r := New()
	in := "first\r\n" + strings.Repeat("z", 3*MaxLine) + "\n\nafter\nlast"
	r.Consume(strings.NewReader(in))
	var got []string
	for _, l := range r.Tail(0) {
		got = append(got, l.Text)
	}
	if len(got) != 5 || got[0] != "first" || got[2] != "" || got[3] != "after" || got[4] != "last" {
		t.Fatalf("lines %.20q, want first, the long line, an empty one, after, last", got)
	}
	if len(got[1]) != MaxLine+len("…") || !strings.HasSuffix(got[1], "…") {
		t.Errorf("the long line was kept as %d bytes, want it cut at %d with a mark", len(got[1]), MaxLine)
	}
}

func TestTimesSurvive(t *testing.T) {
	r := New()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	r.now = func() time.Time { return at }
	r.Add("x")
	if got := r.Tail(1)[0].Time; !got.Equal(at) {
		t.Errorf("time %v, want %v", got, at)
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
