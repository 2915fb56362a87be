package node

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

// fromPlatform is an Options.Platform that answers as a NoCloud seed with data.
func fromPlatform(data []byte, asked *atomic.Int32) func(context.Context) (PlatformAnswer, error) {
	return func(context.Context) (PlatformAnswer, error) {
		asked.Add(1)
		return PlatformAnswer{Source: "nocloud", Tried: []string{"nocloud: answered"}, UserData: data, Hostname: "seeded"}, nil
	}
}

// waitPlatform waits for the user-data search to finish and returns its status.
func waitPlatform(t *testing.T, n *Node) Status {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st := n.Status(); st.Platform != nil && !st.Platform.Searching {
			return st
		}
	}
	t.Fatalf("the user-data search never finished: %+v", n.Status())
	return Status{}
}

// A cloud image's first node inits itself from user data that is its config and says bootstrap: true.
func TestUserDataInits(t *testing.T) {
	c := testcluster.New(t)
	var asked atomic.Int32
	h := start(t, t.TempDir(), func(o *Options) {
		o.Platform = fromPlatform(append([]byte("bootstrap: true\n"), c.ControlPlaneYAML...), &asked)
	})
	waitState(t, h.Node, fsm.Running)
	st := waitPlatform(t, h.Node)
	if st.LockedBy != nodelock.OwnerInit || st.Platform.Action != "init" || st.Platform.Source != "nocloud" || st.Platform.Error != "" {
		t.Errorf("status after user data = locked by %q, platform %+v; want locked by init, nocloud's user data said init", st.LockedBy, st.Platform)
	}
}

// A worker whose user data is a join document joins by itself, pinning the document's CA hash.
func TestUserDataJoins(t *testing.T) {
	c := testcluster.New(t)
	ft := &fakeTickets{c: c, t: t}
	var asked atomic.Int32
	var pinned atomic.Value
	doc := "apiVersion: cairn.dev/v1alpha1\nkind: JoinConfig\nendpoint: 10.5.0.2:50001\ntoken: abcdef.0123456789abcdef\ncaHash: " +
		strings.Repeat("ab", 32) + "\n"
	h := start(t, t.TempDir(), func(o *Options) {
		o.Platform = fromPlatform([]byte(doc), &asked)
		o.TicketsFor = func(ca string) TicketSource { pinned.Store(ca); return ft }
	})
	waitState(t, h.Node, fsm.Running)
	st := waitPlatform(t, h.Node)
	if st.LockedBy != nodelock.OwnerJoin || st.Platform.Action != "join 10.5.0.2:50001" {
		t.Errorf("status = locked by %q, platform %+v; want joined as the user data said", st.LockedBy, st.Platform)
	}
	if got := pinned.Load(); got != strings.Repeat("ab", 32) {
		t.Errorf("ticket client pinned CA %v, want the user data's caHash", got)
	}
}

// User data the node cannot use leaves it in Boot, serving maintenance mode, and says why in status
// and in an event; nothing of the document is in the message.
func TestBadUserDataKeepsTheNodeInBoot(t *testing.T) {
	c := testcluster.New(t)
	for name, tc := range map[string]struct{ data, want string }{
		"a script":                   {"#!/bin/sh\nrm -rf /\n", "not a Cairn document"},
		"a config without bootstrap": {string(c.ControlPlaneYAML), "bootstrap: true"},
		"an unknown field":           {"apiVersion: cairn.dev/v1alpha1\nkind: JoinConfig\nendpoint: cp:50001\ntoken: t\ncaHash: insecure\nsecretSauce: 1\n", "secretSauce"},
	} {
		t.Run(name, func(t *testing.T) {
			var asked atomic.Int32
			h := start(t, t.TempDir(), func(o *Options) { o.Platform = fromPlatform([]byte(tc.data), &asked) })
			st := waitPlatform(t, h.Node)
			if st.State != fsm.Boot || st.LockedBy != "" {
				t.Errorf("after bad user data: state %s, locked by %q; want Boot, unlocked", st.State, st.LockedBy)
			}
			if !strings.Contains(st.Platform.Error, tc.want) || !strings.Contains(st.LastError, "user data from nocloud") {
				t.Errorf("platform error %q, last error %q; want them to say %q", st.Platform.Error, st.LastError, tc.want)
			}
			if name == "a script" && strings.Contains(st.Platform.Error, "rm -rf") {
				t.Errorf("the error quotes the user data: %q", st.Platform.Error)
			}
			failed := false
			for _, e := range h.bus.History(0) {
				failed = failed || e.Kind == events.KindPlatform && e.Outcome == events.Failed
			}
			if !failed {
				t.Error("no platform event says the user data was not used")
			}
			if st.Hostname != "seeded" {
				t.Errorf("hostname %q, want the platform's %q", st.Hostname, "seeded")
			}
		})
	}
}

// A node told to join by its kernel command line does not look for user data: the command line is
// the operator's word for this machine.
func TestKernelJoinSkipsUserData(t *testing.T) {
	c := testcluster.New(t)
	var asked atomic.Int32
	h := start(t, t.TempDir(), func(o *Options) {
		o.JoinAddr, o.JoinToken, o.JoinCA, o.Tickets = "cp:50001", "tok", "ab12", &fakeTickets{c: c, t: t}
		o.Platform = fromPlatform([]byte("junk"), &asked)
	})
	waitState(t, h.Node, fsm.Running)
	if n := asked.Load(); n != 0 || h.Status().Platform != nil {
		t.Errorf("platform asked %d times, status %+v; want not at all", n, h.Status().Platform)
	}
}

// The platform's network (NoCloud's network-config) is applied in maintenance mode and written into the
// config the node inits with, so it holds at every boot; a config with a network of its own keeps it.
func TestUserDataNetwork(t *testing.T) {
	c := testcluster.New(t)
	network := &config.Network{Interfaces: []config.Interface{{Name: "eth1", Addresses: []string{"10.9.0.5/24"}, Gateway: "10.9.0.1"}},
		Nameservers: []string{"10.9.0.53"}}
	var applied atomic.Pointer[config.Network]
	h := start(t, t.TempDir(), func(o *Options) {
		o.Platform = func(context.Context) (PlatformAnswer, error) {
			return PlatformAnswer{Source: "nocloud", UserData: append([]byte("bootstrap: true\n"), c.ControlPlaneYAML...), Network: network}, nil
		}
		o.PlatformNetwork = func(_ context.Context, n *config.Network) error { applied.Store(n); return nil }
	})
	waitState(t, h.Node, fsm.Running)
	waitPlatform(t, h.Node)
	if applied.Load() != network {
		t.Errorf("PlatformNetwork got %+v, want the platform's network", applied.Load())
	}
	if m := h.Node.Machine(); m == nil || !cmp.Equal(&m.Machine.Network, network) {
		t.Errorf("the node's config has network %+v, want the platform's", m)
	}

	cfg, err := ParseConfig(c.ControlPlaneYAML)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Machine.Network = config.Network{Interfaces: []config.Interface{{Name: "eth0", DHCP: true}}}
	withOwn, err := config.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := withPlatformNetwork(withOwn, network)
	if err != nil || string(got) != string(withOwn) {
		t.Errorf("withPlatformNetwork(a config with its own network) = %v; want it unchanged", err)
	}
}
