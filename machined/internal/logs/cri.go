package logs

import (
	"fmt"
	"strings"
	"time"
)

// criLine is one line of a container log file in the CRI format the runtime writes and the kubelet
// rotates:
//
//	2026-01-01T00:00:00.000000000Z stdout F message
//
// The tag says whether the message is a full line (F) or a part of a longer one (P) that later lines
// continue; more tags may follow after a colon.
type criLine struct {
	Time    time.Time
	Stream  string
	Partial bool
	Msg     string
}

// parseCRI parses one line (without its newline).
func parseCRI(line string) (criLine, error) {
	f := strings.SplitN(line, " ", 4)
	if len(f) < 3 {
		return criLine{}, fmt.Errorf("CRI log line %q: want TIME STREAM TAG MESSAGE", clip(line))
	}
	t, err := time.Parse(time.RFC3339Nano, f[0])
	if err != nil {
		return criLine{}, fmt.Errorf("CRI log line %q: time: %w", clip(line), err)
	}
	if f[1] != "stdout" && f[1] != "stderr" {
		return criLine{}, fmt.Errorf("CRI log line %q: stream %q is neither stdout nor stderr", clip(line), f[1])
	}
	tag, _, _ := strings.Cut(f[2], ":")
	if tag != "F" && tag != "P" {
		return criLine{}, fmt.Errorf("CRI log line %q: tag %q is neither F nor P", clip(line), f[2])
	}
	l := criLine{Time: t, Stream: f[1], Partial: tag == "P"}
	if len(f) == 4 {
		l.Msg = f[3]
	}
	return l, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// maxAssembled bounds a line joined from partial parts, so a container that never ends a line cannot
// grow our memory: past it, the part so far is sent as a line of its own.
const maxAssembled = 64 << 10

// assembler joins partial lines, per stream (stdout and stderr parts interleave).
type assembler struct {
	parts map[string]*partial
}

type partial struct {
	start time.Time
	b     strings.Builder
}

// add takes one parsed line and returns the complete line it ends, if any: its time is the first part's.
func (a *assembler) add(l criLine) (time.Time, string, bool) {
	p := a.parts[l.Stream]
	if !l.Partial && p == nil {
		return l.Time, l.Msg, true
	}
	if p == nil {
		if a.parts == nil {
			a.parts = map[string]*partial{}
		}
		p = &partial{start: l.Time}
		a.parts[l.Stream] = p
	}
	p.b.WriteString(l.Msg)
	if l.Partial && p.b.Len() < maxAssembled {
		return time.Time{}, "", false
	}
	delete(a.parts, l.Stream)
	return p.start, p.b.String(), true
}
