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

// The joins wait for a settled first control plane, not for CoreDNS replicas it has no room for.
func TestSettledForJoins(t *testing.T) {
	check := func(name string, ok bool) *machine.HealthCheck { return &machine.HealthCheck{Name: name, Ok: ok} }
	for _, tc := range []struct {
		name   string
		checks []*machine.HealthCheck
		want   bool
	}{
		{"one CoreDNS replica short, DNS answers", []*machine.HealthCheck{check("apiserver", true), check("coredns", false), check("service-dns", true)}, true},
		{"DNS does not answer", []*machine.HealthCheck{check("coredns", false), check("service-dns", false)}, false},
		{"no DNS check", []*machine.HealthCheck{check("coredns", false)}, false},
		{"something else fails too", []*machine.HealthCheck{check("flannel", false), check("coredns", false), check("service-dns", true)}, false},
		{"something else fails alone", []*machine.HealthCheck{check("flannel", false), check("service-dns", true)}, false},
	} {
		if got := settledForJoins(&machine.HealthResponse{Checks: tc.checks}); got != tc.want {
			t.Errorf("%s: settledForJoins = %v, want %v", tc.name, got, tc.want)
		}
	}
}
