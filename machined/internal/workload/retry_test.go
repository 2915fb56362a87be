package workload

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

func TestUntilInvalid(t *testing.T) {
	timeout := errors.New("net/http: timeout awaiting response headers")
	invalid := &kubeapi.StatusError{Code: 422, Body: "spec.x: Invalid value"}
	for _, tc := range []struct {
		name      string
		answers   []error // f's answers in turn; the last repeats
		wantCalls int
		wantErr   string
	}{
		{"a slow API server is asked again", []error{timeout, timeout, nil}, 3, ""},
		{"an invalid object fails at once", []error{invalid}, 1, "Invalid value"},
		{"the deadline ends it with the last error", []error{timeout}, -1, "timeout awaiting response headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			calls := 0
			err := untilInvalid(ctx, time.Millisecond, func(context.Context) error {
				calls++
				return tc.answers[min(calls, len(tc.answers))-1]
			})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("untilInvalid = %v, want error %q", err, tc.wantErr)
			}
			if tc.wantCalls >= 0 && calls != tc.wantCalls {
				t.Errorf("f called %d times, want %d", calls, tc.wantCalls)
			}
		})
	}
}
