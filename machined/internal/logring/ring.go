// Package logring keeps a service's recent log lines in a bounded ring, for the Logs RPC, and follows new
// ones. Memory stays bounded whatever a service prints: the ring holds at most Lines lines, each cut at
// MaxLine bytes.
package logring

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// Limits.
const (
	Lines   = 4096
	MaxLine = 4096
)

// Line is one log line.
type Line struct {
	Time time.Time
	Text string
}

// Ring is a bounded log.
type Ring struct {
	mu    sync.Mutex
	lines []Line
	next  int
	full  bool
	subs  map[chan Line]struct{}
	sink  io.Writer // a file the lines are also written to, once one is attached
	now   func() time.Time
}

// New returns an empty ring.
func New() *Ring {
	return &Ring{lines: make([]Line, Lines), subs: map[chan Line]struct{}{}, now: time.Now}
}

// Add appends one line.
func (r *Ring) Add(text string) {
	if len(text) > MaxLine {
		text = text[:MaxLine] + "…"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l := Line{Time: r.now(), Text: text}
	r.lines[r.next] = l
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	if r.sink != nil {
		io.WriteString(r.sink, l.Time.UTC().Format(time.RFC3339Nano)+" "+text+"\n")
	}
	for ch := range r.subs {
		select {
		case ch <- l:
		default: // a follower that does not keep up misses lines rather than blocking the service
		}
	}
}

// SetSink also writes every later line to w (a rotating file under /var/log/cairn); nil stops that.
func (r *Ring) SetSink(w io.Writer) {
	r.mu.Lock()
	r.sink = w
	r.mu.Unlock()
}

// Tail returns the last n lines (0: all kept), oldest first.
func (r *Ring) Tail(n int) []Line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tail(n)
}

func (r *Ring) tail(n int) []Line {
	var out []Line
	if r.full {
		out = append(out, r.lines[r.next:]...)
	}
	out = append(out, r.lines[:r.next]...)
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// Follow returns the last n lines and a channel of later ones; cancel stops following.
func (r *Ring) Follow(n int) ([]Line, <-chan Line, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan Line, 1024)
	r.subs[ch] = struct{}{}
	return r.tail(n), ch, sync.OnceFunc(func() {
		r.mu.Lock()
		delete(r.subs, ch)
		r.mu.Unlock()
	})
}

// Writer returns a writer whose output becomes lines in the ring; close it to flush a last partial line.
func (r *Ring) Writer() io.WriteCloser {
	pr, pw := io.Pipe()
	go r.Consume(pr)
	return pw
}

// Consume adds every line read from rd until it ends.
func (r *Ring) Consume(rd io.Reader) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		r.Add(sc.Text())
	}
	// A line longer than the scanner's buffer ends the scan; drain so the writer never blocks.
	io.Copy(io.Discard, rd)
}
