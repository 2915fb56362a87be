//go:build integration

package vip_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/cairn-os/cairn/machined/internal/etcdops"
	"github.com/cairn-os/cairn/machined/internal/etcdops/etcdtest"
	"github.com/cairn-os/cairn/machined/internal/netcfg"
	"github.com/cairn-os/cairn/machined/internal/vip"
)

// TestThreeControlPlanes is the HA logic of `make e2e-ha` without VMs, in seconds: three real etcd
// members, each in its own network namespace joined to the others by a bridge, and machined's VIP
// election (vip.Holder with netcfg.VIPLink) on each. A client on the bridge reaches etcd through the
// VIP throughout. The holder releases the VIP on shutdown and another takes it; the next holder loses
// its machine (etcd killed, link down) and a survivor takes the VIP once the lease expires; the dead
// member is removed and the quorum of two writes; the node comes back, a join interrupted elsewhere
// left a learner that its new join replaces, and it is promoted to a third voter.
func TestThreeControlPlanes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	bin := etcdtest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const subnet = "10.88.0."
	vipAddr := netip.MustParseAddr(subnet + "100")
	sw, br := etcdtest.NewSwitch(t, "sw", subnet+"1/24")

	ips := []net.IP{net.ParseIP(vipAddr.String())}
	nodes := make([]*node, 3)
	for i := range nodes {
		n := &node{name: "cp" + strconv.Itoa(i+1), ip: subnet + strconv.Itoa(11+i)}
		n.ns = etcdtest.NewNamespace(t, n.name)
		etcdtest.Plug(t, sw, br, n.ns, n.name, n.ip+"/24")
		ips = append(ips, net.ParseIP(n.ip))
		nodes[i] = n
	}
	p := etcdtest.NewPKI(t, t.TempDir(), ips...)
	var initial []string
	for _, n := range nodes {
		initial = append(initial, n.name+"="+n.peerURL())
	}
	for _, n := range nodes {
		n.start(t, bin, p, initial, true)
	}
	observer := &etcdops.Client{Endpoints: []string{"https://" + vipAddr.String() + ":2379"}, CACert: p.CA, Cert: p.ClientCert,
		Key: p.ClientKey, Timeout: 2 * time.Second, Dial: etcdtest.DialIn(sw.NS)}
	for _, n := range nodes {
		n.client = &etcdops.Client{Endpoints: []string{n.clientURL()}, CACert: p.CA, Cert: p.ClientCert, Key: p.ClientKey,
			Timeout: 2 * time.Second, Dial: etcdtest.DialIn(n.ns.NS)}
		waitFor(ctx, t, n.name+"'s etcd in a cluster of three", func() error {
			ms, err := n.client.Members(ctx)
			if err == nil && len(ms) != 3 {
				err = fmt.Errorf("%d members", len(ms))
			}
			return err
		})
	}

	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	for _, n := range nodes {
		n.elect(log, vipAddr)
	}
	// Before the etcd members stop (cleanups run last first): a holder must not log after the test.
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stopElection()
		}
	})
	first := waitHolder(ctx, t, nodes, vipAddr, "")
	t.Logf("%s holds %s", first.name, vipAddr)
	throughVIP(ctx, t, observer, 3)

	// A graceful shutdown releases the key: another node takes the VIP without waiting for the lease.
	start := time.Now()
	first.stopElection()
	if h := holders(t, nodes, vipAddr); slices.Contains(h, first.name) {
		t.Errorf("%s still carries %s after its shutdown", first.name, vipAddr)
	}
	second := waitHolder(ctx, t, nodes, vipAddr, first.name)
	t.Logf("released by %s, taken by %s after %v (lease TTL %v)", first.name, second.name, time.Since(start).Round(time.Millisecond), ttl)
	throughVIP(ctx, t, observer, 3)
	first.elect(log, vipAddr)

	// The holder's machine dies: etcd killed, the link down, nothing released.
	start = time.Now()
	second.unplug(t)
	third := waitHolder(ctx, t, nodes, vipAddr, second.name)
	t.Logf("%s lost with its machine; %s holds %s after %v", second.name, third.name, vipAddr, time.Since(start).Round(time.Millisecond))
	throughVIP(ctx, t, observer, 3)

	// The operator removes the dead member; the two left are a quorum and write.
	removed, err := third.client.RemoveMember(ctx, second.name, third.name)
	if err != nil || removed.Name != second.name {
		t.Fatalf("RemoveMember(%s) = %+v, %v", second.name, removed, err)
	}
	throughVIP(ctx, t, observer, 2)
	s, err := third.client.Session()
	must(t, err)
	if _, err := s.GrantLease(ctx, time.Minute); err != nil {
		t.Errorf("a write with two members of two = %v, want it to commit", err)
	}
	s.Close()

	// The node comes back. A join that was interrupted left a learner at another address; its join now
	// replaces that learner instead of failing on etcd's one-learner limit.
	stale, _, err := third.client.AddLearner(ctx, second.name, "https://"+subnet+"99:2380")
	must(t, err)
	id, peers, err := third.client.AddLearner(ctx, second.name, second.peerURL())
	if err != nil || id == stale || len(peers) != 3 {
		t.Fatalf("AddLearner(%s) again = %x, %d members, %v; want a new learner in place of %x, three members", second.name, id, len(peers), err, stale)
	}
	second.plugBack(t)
	ms, err := third.client.Members(ctx)
	must(t, err)
	initial = nil
	for _, m := range ms {
		name := m.Name
		if m.ID == id {
			name = second.name
		}
		initial = append(initial, name+"="+m.PeerURLs[0])
	}
	second.start(t, bin, p, initial, false)
	waitFor(ctx, t, second.name+" promoted", func() error { return third.client.Promote(ctx, id) })
	ms, err = third.client.Members(ctx)
	must(t, err)
	voters := 0
	for _, m := range ms {
		if !m.IsLearner {
			voters++
		}
	}
	if voters != 3 {
		t.Errorf("members after the rejoin = %+v, want three voters", ms)
	}
	second.elect(log, vipAddr)
	time.Sleep(3 * renew)
	if h := holders(t, nodes, vipAddr); len(h) != 1 || h[0] != third.name {
		t.Errorf("holders after %s came back = %v, want %s alone (a returning node does not take the VIP)", second.name, h, third.name)
	}
	throughVIP(ctx, t, observer, 3)
	for _, n := range nodes {
		n.stopElection() // while every etcd still runs: the holder releases cleanly
	}
}

// The election's timing, shorter than machined's so the test takes seconds.
const (
	ttl   = 4 * time.Second
	renew = time.Second
)

type node struct {
	name, ip string
	ns       *etcdtest.Namespace
	client   *etcdops.Client
	etcd     *etcdtest.Proc
	stop     context.CancelFunc
	done     chan struct{}
}

func (n *node) peerURL() string   { return "https://" + n.ip + ":2380" }
func (n *node) clientURL() string { return "https://" + n.ip + ":2379" }

// start runs the node's etcd on a fresh data directory, as a member of a new cluster or joining one.
func (n *node) start(t *testing.T, bin string, p etcdtest.PKI, initial []string, isNew bool) {
	n.etcd = etcdtest.Start(t, etcdtest.Member{Bin: bin, Name: n.name, DataDir: filepath.Join(t.TempDir(), "etcd"), PKI: p,
		ClientURL: n.clientURL(), PeerURL: n.peerURL(), ListenClient: "https://0.0.0.0:2379",
		InitialCluster: strings.Join(initial, ","), New: isNew, NetNS: n.ns.Name})
}

// elect runs the node's part in the VIP election until stopElection.
func (n *node) elect(log *slog.Logger, addr netip.Addr) {
	ctx, cancel := context.WithCancel(context.Background())
	n.stop, n.done = cancel, make(chan struct{})
	h := &vip.Holder{VIP: addr, Node: n.name, TTL: ttl, Renew: renew, Log: log.With("node", n.name),
		Link: nsLink{VIPLink: netcfg.VIPLink{NL: n.ns.H}, ns: n.ns.NS},
		Open: func() (vip.Store, func(), error) {
			s, err := n.client.Session()
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		}}
	go func() { defer close(n.done); h.Run(ctx) }()
}

// stopElection is machined's shutdown: the holder releases the key and takes the address off. Stopping
// a stopped election does nothing.
func (n *node) stopElection() {
	n.stop()
	<-n.done
}

// unplug is the machine dying: its etcd killed and its link down; its election stops with nothing
// released (etcd is gone).
func (n *node) unplug(t *testing.T) {
	n.etcd.Kill()
	l, err := n.ns.H.LinkByName("eth0")
	must(t, err)
	must(t, n.ns.H.LinkSetDown(l))
	n.stopElection()
}

func (n *node) plugBack(t *testing.T) {
	l, err := n.ns.H.LinkByName("eth0")
	must(t, err)
	must(t, n.ns.H.LinkSetUp(l))
}

// holders lists the nodes whose eth0 carries the VIP.
func holders(t *testing.T, nodes []*node, addr netip.Addr) []string {
	t.Helper()
	var out []string
	for _, n := range nodes {
		l, err := n.ns.H.LinkByName("eth0")
		must(t, err)
		as, err := n.ns.H.AddrList(l, netlink.FAMILY_V4)
		must(t, err)
		for _, a := range as {
			if a.IP.Equal(net.ParseIP(addr.String())) {
				out = append(out, n.name)
			}
		}
	}
	return out
}

// waitHolder waits until one node other than not holds the VIP, and fails if two ever hold it at once.
func waitHolder(ctx context.Context, t *testing.T, nodes []*node, addr netip.Addr, not string) *node {
	t.Helper()
	for {
		h := holders(t, nodes, addr)
		if len(h) > 1 {
			t.Fatalf("%v hold %s at once", h, addr)
		}
		if len(h) == 1 && h[0] != not {
			for _, n := range nodes {
				if n.name == h[0] {
					return n
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no node but %q took %s: %v", not, addr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// throughVIP lists etcd's members through the VIP from the bridge, as a client of the cluster's
// endpoint would.
func throughVIP(ctx context.Context, t *testing.T, c *etcdops.Client, want int) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("%d members through the VIP", want), func() error {
		ms, err := c.Members(ctx)
		if err == nil && len(ms) != want {
			err = fmt.Errorf("%d members", len(ms))
		}
		return err
	})
}

func waitFor(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// nsLink is netcfg.VIPLink for a node whose links are in ns: the gratuitous ARP socket is opened there.
type nsLink struct {
	netcfg.VIPLink
	ns netns.NsHandle
}

func (l nsLink) Announce(addr netip.Addr, link string) error {
	return etcdtest.InNS(l.ns, func() error { return l.VIPLink.Announce(addr, link) })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
