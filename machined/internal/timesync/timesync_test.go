package timesync

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/hack/ntpserver"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestSyncOnce(t *testing.T) {
	tests := []struct {
		name      string
		answers   map[string]Answer // absent: the server fails
		wantErr   string
		wantSteps []time.Duration
		wantFrom  string
	}{
		{name: "the first server that answers, a step", answers: map[string]Answer{"b": {Offset: 5 * time.Second}},
			wantSteps: []time.Duration{5 * time.Second}, wantFrom: "b"},
		{name: "a small offset is left alone", answers: map[string]Answer{"a": {Offset: 20 * time.Millisecond}, "b": {Offset: time.Hour}},
			wantFrom: "a"},
		{name: "a clock behind steps back", answers: map[string]Answer{"a": {Offset: -3 * time.Minute}},
			wantSteps: []time.Duration{-3 * time.Minute}, wantFrom: "a"},
		{name: "nobody answers", wantErr: "a: no answer\nb: no answer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var steps []time.Duration
			s := &Syncer{Servers: []string{"a", "b"}, Log: quiet(),
				Query: func(_ context.Context, srv string) (Answer, error) {
					if a, ok := tc.answers[srv]; ok {
						return a, nil
					}
					return Answer{}, errors.New("no answer")
				},
				Step: func(d time.Duration) error { steps = append(steps, d); return nil }}
			err := s.SyncOnce(context.Background())
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("SyncOnce() = %v, want %q", err, tc.wantErr)
				}
				if st := s.State(); st.Synced || st.LastErr != tc.wantErr {
					t.Errorf("State() = %+v, want not synced with the error", st)
				}
				if err := s.WaitSynced(context.Background(), 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "a: no answer") {
					t.Errorf("WaitSynced() = %v, want the servers' failures", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(steps) != len(tc.wantSteps) || (len(steps) > 0 && steps[0] != tc.wantSteps[0]) {
				t.Errorf("steps = %v, want %v", steps, tc.wantSteps)
			}
			st := s.State()
			if !st.Synced || st.Server != tc.wantFrom || st.Steps != len(tc.wantSteps) {
				t.Errorf("State() = %+v, want synced from %s with %d step(s)", st, tc.wantFrom, len(tc.wantSteps))
			}
			if err := s.WaitSynced(context.Background(), time.Second); err != nil {
				t.Errorf("WaitSynced() after an answer = %v", err)
			}
		})
	}
}

// TestSNTPAgainstAServer asks a real NTP exchange of a server whose clock is 42 s ahead.
func TestSNTPAgainstAServer(t *testing.T) {
	srv, err := ntpserver.Listen("127.0.0.1:0", 42*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	a, err := SNTP(context.Background(), srv.Conn.LocalAddr().String())
	if err != nil {
		t.Fatalf("SNTP() = %v", err)
	}
	if d := a.Offset - 42*time.Second; d > 100*time.Millisecond || d < -100*time.Millisecond {
		t.Errorf("SNTP() offset = %v, want 42s", a.Offset)
	}
	srv.Close()
	if _, err := SNTP(context.Background(), srv.Conn.LocalAddr().String()); err == nil {
		t.Error("SNTP() of a closed server succeeded")
	}
}
