package workload

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/paths"
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
		name      string
		vip, self string
		members   []*machine.Member
		want      map[string][]netip.Addr
	}{
		{"every control plane behind the name", "", "", cps,
			map[string][]netip.Addr{"api.internal.demo": a("10.5.0.2", "10.5.0.3"), "cp-1": a("10.5.0.2"), "cp-2": a("10.5.0.3")}},
		{"the virtual IP behind the name", "10.5.0.250", "", cps,
			map[string][]netip.Addr{"api.internal.demo": a("10.5.0.250"), "cp-1": a("10.5.0.2"), "cp-2": a("10.5.0.3")}},
		// A control plane's API server reaches etcd by etcd.internal: its own member first.
		{"etcd's name on a control plane", "10.5.0.250", "cp-2", cps,
			map[string][]netip.Addr{"api.internal.demo": a("10.5.0.250"), "etcd.internal.demo": a("10.5.0.3", "10.5.0.2"),
				"cp-1": a("10.5.0.2"), "cp-2": a("10.5.0.3")}},
		{"no members yet", "", "", nil, map[string][]netip.Addr{}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, Names("demo", tc.vip, tc.self, tc.members), cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
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

// A control plane's member list: the Nodes', with the addresses etcd's members recorded taking precedence
// (recorded at each boot, before the kubelet reports a new address) and the members that have no Node yet
// (a joining control plane) added.
func TestWithEtcdNames(t *testing.T) {
	nodes := []*machine.Member{{Name: "cp-1", Address: "10.5.0.2", ControlPlane: true}, {Name: "cp-3", Address: "10.5.0.4", ControlPlane: true}}
	got := withEtcdNames(nodes, map[string]string{"cp-1": "10.5.0.9", "cp-2": "10.5.0.3"})
	want := []*machine.Member{{Name: "cp-1", Address: "10.5.0.9", ControlPlane: true}, {Name: "cp-2", Address: "10.5.0.3", ControlPlane: true},
		{Name: "cp-3", Address: "10.5.0.4", ControlPlane: true}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y *machine.Member) bool {
		return x.Name == y.Name && x.Address == y.Address && x.ControlPlane == y.ControlPlane
	})); diff != "" {
		t.Errorf("withEtcdNames (-want +got):\n%s", diff)
	}
	if nodes[0].Address != "10.5.0.2" {
		t.Errorf("withEtcdNames changed its argument: %v", nodes[0])
	}
}

// A refresh takes a member's name away only when both sources answered: while a third control plane
// joined, the first one's etcd was too busy to answer, the API's two Nodes stood for the whole cluster, and
// the learner (in etcd's records only) lost its name, by which the etcd members reach it.
func TestMemberAnswersOver(t *testing.T) {
	m := func(name, addr string) *machine.Member {
		return &machine.Member{Name: name, Address: addr, ControlPlane: true}
	}
	known := []*machine.Member{m("cp-1", "10.5.0.2"), m("cp-2", "10.5.0.3"), m("cp-3", "10.5.0.4")}
	nodes := []*machine.Member{m("cp-1", "10.5.0.2"), m("cp-2", "10.5.0.3")}
	timeout := errors.New("context deadline exceeded")
	for _, tc := range []struct {
		name     string
		a        memberAnswers
		answered bool
		want     string
	}{
		{"both answer: cp-3 is gone", memberAnswers{api: nodes, recorded: map[string]string{"cp-1": "10.5.0.2", "cp-2": "10.5.0.3"}}, true,
			"cp-1=10.5.0.2 cp-2=10.5.0.3"},
		{"etcd does not answer: the learner stays", memberAnswers{api: nodes, etcdErr: timeout}, true,
			"cp-1=10.5.0.2 cp-2=10.5.0.3 cp-3=10.5.0.4"},
		{"the API does not answer: etcd's addresses, the others kept", memberAnswers{apiErr: timeout, recorded: map[string]string{"cp-2": "10.5.0.9"}}, true,
			"cp-1=10.5.0.2 cp-2=10.5.0.9 cp-3=10.5.0.4"},
		{"a worker: the API alone is every source", memberAnswers{api: nodes}, true,
			"cp-1=10.5.0.2 cp-2=10.5.0.3"},
		{"neither answers", memberAnswers{apiErr: timeout, etcdErr: timeout}, false,
			"cp-1=10.5.0.2 cp-2=10.5.0.3 cp-3=10.5.0.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, x := range tc.a.over(known) {
				got = append(got, x.Name+"="+x.Address)
			}
			if g := strings.Join(got, " "); g != tc.want || tc.a.answered() != tc.answered {
				t.Errorf("over(known) = %q, answered %v; want %q, %v", g, tc.a.answered(), tc.want, tc.answered)
			}
		})
	}
}

// The first control plane has no join ticket: after a reboot, before its API server or its etcd answers,
// the names of the other control planes (which its etcd member needs to reach them) come from what it
// recorded while Running, with its own at its current address.
func TestDiscoveryNamesAfterReboot(t *testing.T) {
	gen, err := config.Generate(config.GenOptions{ClusterName: "demo", Endpoint: "https://10.5.0.2:6443"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	boot := func(addr string) (*Workload, *map[string][]netip.Addr) {
		written := new(map[string][]netip.Addr)
		w := &Workload{
			Paths:    paths.Paths{Root: root},
			Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
			Hosts:    func(n map[string][]netip.Addr) { *written = n },
			StateDir: func() string { return root },
			Identity: func() (string, []netip.Addr) { return "cp-1", []netip.Addr{netip.MustParseAddr(addr)} },
		}
		if err := w.render(gen.ControlPlane); err != nil {
			t.Fatal(err)
		}
		return w, written
	}
	w, _ := boot("10.5.0.2")
	w.publishNames([]*machine.Member{{Name: "cp-1", Address: "10.5.0.2"}, {Name: "cp-2", Address: "10.5.0.3"}, {Name: "cp-3", Address: "10.5.0.4"}})

	w, written := boot("10.5.0.9") // back at another address
	if err := w.discoveryNames(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := "api.internal.demo=10.5.0.3,10.5.0.4,10.5.0.9 cp-1=10.5.0.9 cp-2=10.5.0.3 cp-3=10.5.0.4 etcd.internal.demo=10.5.0.9,10.5.0.3,10.5.0.4"
	if got := describeNames(*written); got != want {
		t.Errorf("names after the reboot = %q, want %q", got, want)
	}
	// Neither its API server nor its etcd answers yet: a refresh keeps the names (make e2e-ha saw a
	// refresh publish this node alone, taking its peers' names from its etcd member).
	*written = nil
	w.refreshNames(t.Context())
	if *written != nil {
		t.Errorf("a refresh with nothing answering wrote %q, want /etc/hosts left as it was", describeNames(*written))
	}
}
