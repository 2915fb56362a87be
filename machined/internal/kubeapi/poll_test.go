package kubeapi

import (
	"context"
	"errors"
	"fmt"
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

func TestPollBusy(t *testing.T) {
	busy := &StatusError{Code: 504, Body: "timeout"}
	forbidden := &StatusError{Code: 403, Body: "forbidden"}
	for _, tc := range []struct {
		name      string
		errs      []error // what each try returns; nil after the last
		wantCalls int
		wantErr   error
	}{
		{"answers at once", nil, 1, nil},
		{"late, then answers", []error{errors.New("timeout awaiting response headers"), busy}, 3, nil},
		{"too many requests, then answers", []error{&StatusError{Code: 429}}, 2, nil},
		{"refused: no second try", []error{forbidden}, 1, forbidden},
		{"late, then refused", []error{busy, fmt.Errorf("read Node n1: %w", forbidden)}, 2, forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := PollBusy(context.Background(), time.Millisecond, func(context.Context) error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("PollBusy = %v after %d tries, want %v after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}
