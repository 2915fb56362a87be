package health

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestRunKeepsOrder(t *testing.T) {
	down := errors.New("connection refused")
	got := Run(context.Background(), []Probe{
		{"etcd", func(context.Context) (string, error) { return "healthy", nil }},
		{"apiserver", func(context.Context) (string, error) { return "", down }},
		{"node", func(context.Context) (string, error) { return "n1 Ready", nil }},
	})
	want := []Check{{Name: "etcd", Message: "healthy"}, {Name: "apiserver", Err: down}, {Name: "node", Message: "n1 Ready"}}
	if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("Run() checks (-want +got):\n%s", diff)
	}
}

// A probe that waits must not hold the others back: here the first one waits until the second has run,
// which only happens if they run at the same time. Run one after the other, the first would wait out
// the context and fail.
func TestRunProbesTogether(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	second := make(chan struct{})
	got := Run(ctx, []Probe{
		{"service-dns", func(ctx context.Context) (string, error) {
			select {
			case <-second:
				return "answered", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}},
		{"coredns", func(context.Context) (string, error) { close(second); return "1 of 1 replicas ready", nil }},
	})
	for _, c := range got {
		if c.Err != nil {
			t.Errorf("Run(): check %s failed: %v (the probes ran one after the other)", c.Name, c.Err)
		}
	}
}
