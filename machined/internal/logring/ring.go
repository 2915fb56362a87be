// Package logring keeps a service's recent log lines in a bounded ring, for the Logs RPC, and follows new
// ones. Memory stays bounded whatever a service prints: the ring holds at most Budget bytes of lines,
// each cut at MaxLine bytes, and reading a service's output takes one MaxLine buffer however long its
// lines are.
//
// Lines are packed into a few byte chunks rather than kept as strings: a chunk holds no pointers, so the
// garbage collector never scans it, and a ring costs only the chunks its lines fill.
package logring

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"time"
)

// Limits. Budget bounds what a ring keeps (a line costs its text and 10 bytes); the files under
// /var/log/cairn keep everything once EPHEMERAL is mounted.
const (
	Budget  = 512 << 10
	MaxLine = 4096

	chunkSize = 32 << 10
	maxChunks = Budget / chunkSize
	header    = 10 // unix nanoseconds (8 bytes), text length (2 bytes)
)

// Line is one log line.
type Line struct {
	Time time.Time
	Text string
}

// Record is a line of a named log as the Logs and Dmesg RPCs stream it: a service's, the kernel's or a
// pod container's.
type Record struct {
	Time    time.Time
	Service string
	Line    string
}

// Ring is a bounded log.
type Ring struct {
	mu sync.Mutex
	// chunks hold whole records (header, then text), oldest first; only the last one grows. When a new
	// chunk is needed and the ring has maxChunks, the oldest chunk's lines are dropped and its memory
	// reused.
	chunks [][]byte
	subs   map[chan Line]struct{}
	sink   io.Writer // a file the lines are also written to, once one is attached
	now    func() time.Time
}

// New returns an empty ring; it takes memory as lines arrive.
func New() *Ring {
	return &Ring{subs: map[chan Line]struct{}{}, now: time.Now}
}

// Add appends one line.
func (r *Ring) Add(text string) {
	if len(text) > MaxLine {
		text = text[:MaxLine] + "…"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l := Line{Time: r.now(), Text: text}
	r.store(l)
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

func (r *Ring) store(l Line) {
	need := header + len(l.Text)
	n := len(r.chunks)
	if n == 0 || cap(r.chunks[n-1])-len(r.chunks[n-1]) < need {
		var c []byte
		if n == maxChunks {
			c = r.chunks[0][:0]
			copy(r.chunks, r.chunks[1:])
			r.chunks = r.chunks[:n-1]
		} else {
			c = make([]byte, 0, chunkSize)
		}
		r.chunks = append(r.chunks, c)
		n = len(r.chunks)
	}
	c := r.chunks[n-1]
	c = binary.LittleEndian.AppendUint64(c, uint64(l.Time.UnixNano()))
	c = binary.LittleEndian.AppendUint16(c, uint16(len(l.Text)))
	r.chunks[n-1] = append(c, l.Text...)
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
	total := 0
	r.each(func([]byte, int) { total++ })
	skip := 0
	if n > 0 && total > n {
		skip = total - n
	}
	out := make([]Line, 0, total-skip)
	i := 0
	r.each(func(rec []byte, textLen int) {
		if i++; i <= skip {
			return
		}
		ns := int64(binary.LittleEndian.Uint64(rec))
		out = append(out, Line{Time: time.Unix(0, ns), Text: string(rec[header : header+textLen])})
	})
	return out
}

// each calls f with every record, oldest first.
func (r *Ring) each(f func(rec []byte, textLen int)) {
	for _, c := range r.chunks {
		for len(c) >= header {
			textLen := int(binary.LittleEndian.Uint16(c[8:]))
			f(c, textLen)
			c = c[header+textLen:]
		}
	}
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

// Consume adds every line read from rd until it ends. A line longer than MaxLine is cut (Add marks it)
// and the rest of it skipped, so one huge line neither grows the buffer nor stops the log.
func (r *Ring) Consume(rd io.Reader) {
	br := bufio.NewReaderSize(rd, MaxLine+1)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			r.Add(string(line)) // longer than MaxLine: Add cuts it and marks the cut
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil {
				return
			}
			continue
		}
		if len(line) > 0 {
			r.Add(string(trimEOL(line)))
		}
		if err != nil {
			return
		}
	}
}

// trimEOL drops the line's newline and a carriage return before it, as bufio.ScanLines does.
func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}
