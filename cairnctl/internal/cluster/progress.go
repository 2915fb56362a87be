package cluster

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress prints one line per step with the time since the command started, so a slow step (a boot
// under emulation, Init pulling up Kubernetes) is visible while it happens and measurable afterwards.
type Progress struct {
	w     io.Writer
	start time.Time
	mu    sync.Mutex
}

// NewProgress starts the clock.
func NewProgress(w io.Writer) *Progress {
	if w == nil {
		w = io.Discard
	}
	return &Progress{w: w, start: time.Now()}
}

// Printf prints one progress line.
func (p *Progress) Printf(format string, a ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, a...))
}

// Elapsed is the time since the start.
func (p *Progress) Elapsed() time.Duration { return time.Since(p.start) }
