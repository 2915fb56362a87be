package workload

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
)

func TestNames(t *testing.T) {
	a := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	cps := []*machine.Member{{Name: "cp-1", Address: "10.5.0.2"}, {Name: "cp-2", Address: "10.5.0.3"}, {Name: "bad", Address: "nope"}}
	tests := []struct {
		name    string
		vip     string
		members []*machine.Member
		want    map[string][]netip.Addr
	}{
		{"every control plane behind the name", "", cps,
			map[string][]netip.Addr{"api.internal.demo": a("10.5.0.2", "10.5.0.3"), "cp-1": a("10.5.0.2"), "cp-2": a("10.5.0.3")}},
		{"the virtual IP behind the name", "10.5.0.250", cps,
			map[string][]netip.Addr{"api.internal.demo": a("10.5.0.250"), "cp-1": a("10.5.0.2"), "cp-2": a("10.5.0.3")}},
		{"no members yet", "", nil, map[string][]netip.Addr{}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, Names("demo", tc.vip, tc.members), cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
			t.Errorf("%s: Names (-want +got):\n%s", tc.name, diff)
		}
	}
}

// A change in membership (a control plane that joined, left or moved) reaches /etc/hosts and is an
// event; a refresh that finds the same members is neither logged nor reported again.
func TestPublishNamesReportsChanges(t *testing.T) {
	var written []map[string][]netip.Addr
	var events []string
	w := &Workload{
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hosts:      func(n map[string][]netip.Addr) { written = append(written, n) },
		NamesEvent: func(m string) { events = append(events, m) },
		cfg:        &config.MachineConfig{Cluster: config.Cluster{Name: "demo"}},
	}
	one := []*machine.Member{{Name: "cp-1", Address: "10.5.0.2"}}
	moved := []*machine.Member{{Name: "cp-1", Address: "10.5.0.9"}}
	w.publishNames(one)
	w.publishNames(one)
	w.publishNames(moved)
	if len(written) != 3 {
		t.Errorf("/etc/hosts written %d times, want 3 (every refresh)", len(written))
	}
	want := []string{"api.internal.demo=10.5.0.2 cp-1=10.5.0.2", "api.internal.demo=10.5.0.9 cp-1=10.5.0.9"}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A joining worker publishes the names before its kubelet starts, when it has no credential to ask the
// API yet: from its join ticket's members.
func TestDiscoveryNamesFromTicket(t *testing.T) {
	var written map[string][]netip.Addr
	w := &Workload{
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hosts: func(n map[string][]netip.Addr) { written = n },
		Ticket: func() (*machine.JoinTicket, error) {
			return &machine.JoinTicket{Members: []*machine.Member{{Name: "cp-1", Address: "10.5.0.2", ControlPlane: true}}}, nil
		},
		cfg: &config.MachineConfig{Machine: config.Machine{Type: config.TypeWorker}, Cluster: config.Cluster{Name: "demo"}},
	}
	if err := w.discoveryNames(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := describeNames(written), "api.internal.demo=10.5.0.2 cp-1=10.5.0.2"; got != want {
		t.Errorf("names = %q, want %q", got, want)
	}
}
