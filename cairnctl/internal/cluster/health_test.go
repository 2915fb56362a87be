package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/machine"
)

func health(ok bool, failing ...string) *machine.HealthResponse {
	r := &machine.HealthResponse{Ok: ok}
	for _, f := range failing {
		r.Checks = append(r.Checks, &machine.HealthCheck{Name: f, Message: "not yet"})
	}
	return r
}

func TestWaitHealthy(t *testing.T) {
	answers := []*machine.HealthResponse{
		health(false, "coredns", "flannel"),
		health(false, "coredns", "flannel"), // the same checks: not reported again
		nil,                                 // the node did not answer
		health(false, "coredns"),
		health(true),
	}
	i := 0
	check := func(context.Context) (*machine.HealthResponse, error) {
		r := answers[i]
		i++
		if r == nil {
			return nil, errors.New("unavailable")
		}
		return r, nil
	}
	var reports [][]string
	err := WaitHealthy(context.Background(), check, time.Millisecond, func(f []string) { reports = append(reports, f) })
	if err != nil {
		t.Fatalf("WaitHealthy = %v, want nil", err)
	}
	want := [][]string{{"coredns (not yet)", "flannel (not yet)"}, {"coredns (not yet)"}}
	if d := cmp.Diff(want, reports); d != "" {
		t.Errorf("reports (-want +got):\n%s", d)
	}
}

func TestWaitHealthyTimeoutNamesTheChecks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	check := func(context.Context) (*machine.HealthResponse, error) { return health(false, "coredns"), nil }
	err := WaitHealthy(ctx, check, time.Millisecond, func([]string) {})
	if err == nil || !strings.Contains(err.Error(), "coredns (not yet)") {
		t.Errorf("WaitHealthy = %v, want an error naming coredns", err)
	}
}
