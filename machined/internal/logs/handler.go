package logs

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/cairn-os/cairn/machined/internal/logring"
)

// NewHandler returns a handler that logs through next (the console) and also copies each record, as one
// text line, into ring ("machined"): so `cairnctl logs machined` shows what the console shows. The ring
// stamps each line with its own time, so the line leaves the time out.
func NewHandler(next slog.Handler, ring *logring.Ring) slog.Handler {
	text := slog.NewTextHandler(LineWriter(ring), &slog.HandlerOptions{
		Level: slog.LevelDebug, // next decides what is logged
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	return &tee{next: next, ring: text}
}

type tee struct {
	next, ring slog.Handler
}

func (t *tee) Enabled(ctx context.Context, l slog.Level) bool { return t.next.Enabled(ctx, l) }

func (t *tee) Handle(ctx context.Context, r slog.Record) error {
	// The ring never fails a log call: it takes what it can, and the console's answer is the one returned.
	_ = t.ring.Handle(ctx, r)
	return t.next.Handle(ctx, r)
}

func (t *tee) WithAttrs(as []slog.Attr) slog.Handler {
	return &tee{next: t.next.WithAttrs(as), ring: t.ring.WithAttrs(as)}
}

func (t *tee) WithGroup(name string) slog.Handler {
	return &tee{next: t.next.WithGroup(name), ring: t.ring.WithGroup(name)}
}

// LineWriter returns a writer that adds each line written to ring, synchronously. Each Write must hold
// whole lines (a log handler writes one record per call); a missing final newline still ends the line.
func LineWriter(ring *logring.Ring) io.Writer { return lineWriter{ring} }

type lineWriter struct{ ring *logring.Ring }

func (w lineWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimSuffix(string(p), "\n"), "\n") {
		w.ring.Add(l)
	}
	return len(p), nil
}
