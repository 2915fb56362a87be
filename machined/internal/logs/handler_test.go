package logs

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/logring"
)

func ringTexts(r *logring.Ring) []string {
	var out []string
	for _, l := range r.Tail(0) {
		out = append(out, l.Text)
	}
	return out
}

func TestHandlerCopiesTheConsoleIntoTheRing(t *testing.T) {
	var console bytes.Buffer
	ring := logring.New()
	log := slog.New(NewHandler(slog.NewTextHandler(&console, &slog.HandlerOptions{Level: slog.LevelInfo}), ring))

	log.Info("machine API listening", "address", ":50000")
	log.Debug("not shown on the console, so not in the ring either")
	log.With("service", "kubelet").WithGroup("probe").Warn("unhealthy", "error", "connection refused")

	want := []string{
		`level=INFO msg="machine API listening" address=:50000`,
		`level=WARN msg=unhealthy service=kubelet probe.error="connection refused"`,
	}
	if diff := cmp.Diff(want, ringTexts(ring)); diff != "" {
		t.Errorf("ring lines mismatch (-want +got):\n%s", diff)
	}
	if n := strings.Count(console.String(), "\n"); n != 2 || !strings.Contains(console.String(), "time=") {
		t.Errorf("console got %d lines, want 2 with their time:\n%s", n, console.String())
	}
}

func TestLineWriterSplitsLines(t *testing.T) {
	ring := logring.New()
	w := LineWriter(ring)
	w.Write([]byte("one\ntwo\n"))
	w.Write([]byte("three"))
	if diff := cmp.Diff([]string{"one", "two", "three"}, ringTexts(ring)); diff != "" {
		t.Errorf("ring lines mismatch (-want +got):\n%s", diff)
	}
}
