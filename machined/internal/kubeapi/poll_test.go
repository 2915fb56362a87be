package kubeapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPollPauses(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     []time.Duration
	}{
		{2 * time.Second, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
			800 * time.Millisecond, 1600 * time.Millisecond, 2 * time.Second, 2 * time.Second}},
		{50 * time.Millisecond, []time.Duration{50 * time.Millisecond, 50 * time.Millisecond}},
	} {
		var got []time.Duration
		pause := backoff(tc.interval)
		for len(got) < len(tc.want) {
			got = append(got, pause())
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("pauses for interval %v (-want +got):\n%s", tc.interval, diff)
		}
	}
}

func TestPoll(t *testing.T) {
	notYet := errors.New("not yet")
	calls := 0
	err := Poll(context.Background(), time.Millisecond, func(context.Context) error {
		if calls++; calls < 3 {
			return notYet
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Poll = %v after %d calls, want nil after 3", err, calls)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = Poll(ctx, time.Millisecond, func(context.Context) error { return notYet })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Poll after its context ended = %v, want a deadline error", err)
	}
	if err == nil || !strings.Contains(err.Error(), "not yet") {
		t.Errorf("Poll after its context ended = %v, want the last error in it", err)
	}
}
