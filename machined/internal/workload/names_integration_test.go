//go:build integration

package workload_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/etcdops"
	"github.com/cairn-os/cairn/machined/internal/etcdops/etcdtest"
	"github.com/cairn-os/cairn/machined/internal/netcfg"
	"github.com/cairn-os/cairn/machined/internal/workload"
)

// TestMemberReaddressedByName is issue 22's "a control plane's address changes and the others still
// reach it by name", without VMs: three real etcd members, each in its own network namespace on one
// bridge and with its own /etc/hosts (as a node's etcd pod mounts the node's), advertising their peer and
// client URLs by node name as machined renders them. The members join as machined's join service makes
// them join: the learner's address recorded in etcd (etcdops.PutName), every node's /etc/hosts written
// from the records (workload.Names, netcfg.Hosts), the learner added by name. Then one member's machine
// comes back at another address: it rejoins its quorum before anyone knows the new address, records it
// once healthy (machined's etcd-name task), and once the other nodes' /etc/hosts carry it, their members
// reach it again at the same URL: each one's prober, which dials the member's peer URL, gets answers
// from it again.
func TestMemberReaddressedByName(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network and mount namespaces")
	}
	bin := etcdtest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const subnet = "10.89.0."
	sw, br := etcdtest.NewSwitch(t, "nsw", subnet+"1/24")
	moved := netip.MustParseAddr(subnet + "23")
	ips := []net.IP{net.ParseIP(moved.String())}
	var names []string
	nodes := make([]*member, 3)
	for i := range nodes {
		n := &member{name: "cp" + strconv.Itoa(i+1), ip: netip.MustParseAddr(subnet + strconv.Itoa(11+i)),
			hosts: filepath.Join(t.TempDir(), "hosts"), data: filepath.Join(t.TempDir(), "etcd")}
		n.ns = etcdtest.NewNamespace(t, "n"+n.name)
		etcdtest.Plug(t, sw, br, n.ns, "n"+n.name, n.ip.String()+"/24")
		ips, names = append(ips, net.ParseIP(n.ip.String())), append(names, n.name)
		nodes[i] = n
	}
	p := etcdtest.NewNamedPKI(t, t.TempDir(), names, ips...)
	for _, n := range nodes {
		n.pki = p
		n.writeHosts(t, nil)
	}
	// machined's refresher on every node: the recorded addresses into /etc/hosts.
	publish := func(from *member) {
		t.Helper()
		recorded, err := from.client().Names(ctx)
		must(t, err)
		var ms []*machine.Member
		for name, a := range recorded {
			ms = append(ms, &machine.Member{Name: name, Address: a, ControlPlane: true})
		}
		for _, n := range nodes {
			n.writeHosts(t, ms)
		}
	}

	first := nodes[0]
	first.start(t, bin, "")
	waitFor(ctx, t, "cp1's etcd", func() error { _, err := first.client().Members(ctx); return err })
	must(t, first.client().PutName(ctx, first.name, first.ip.String()))
	for _, n := range nodes[1:] {
		// The join service: record the address, publish it, add the learner by name.
		must(t, first.client().PutName(ctx, n.name, n.ip.String()))
		publish(first)
		var id uint64
		var peers []etcdops.Peer
		// etcd refuses a member while the last one it added is not yet active for a while ("unhealthy
		// cluster"); the joining node retries its join as well.
		waitFor(ctx, t, n.name+"'s learner added", func() (err error) {
			id, peers, err = first.client().AddLearner(ctx, n.name, n.peerURL())
			return err
		})
		var initial []string
		for _, pe := range peers {
			initial = append(initial, cmp.Or(pe.Name, n.name)+"="+pe.PeerURL)
		}
		n.start(t, bin, strings.Join(initial, ","))
		waitFor(ctx, t, n.name+" promoted", func() error { return first.client().Promote(ctx, id) })
	}
	ms, err := first.client().Members(ctx)
	must(t, err)
	for _, m := range ms {
		if want := "https://" + m.Name + ":2380"; len(m.PeerURLs) != 1 || m.PeerURLs[0] != want || m.IsLearner {
			t.Errorf("member %s = %+v, want a voter at %s", m.Name, m, want)
		}
	}

	// cp3's machine comes back at another address.
	third := nodes[2]
	var thirdID uint64
	for _, m := range ms {
		if m.Name == third.name {
			thirdID = m.ID
		}
	}
	third.etcd.Stop()
	l, err := third.ns.H.LinkByName("eth0")
	must(t, err)
	must(t, third.ns.H.AddrDel(l, etcdtest.Addr(third.ip.String()+"/24")))
	third.ip = moved
	must(t, third.ns.H.AddrAdd(l, etcdtest.Addr(third.ip.String()+"/24")))
	third.writeHosts(t, third.known) // its own name at its new address, the others' as it last knew them
	before := nodes[1].probes(ctx, t, thirdID)
	third.start(t, bin, "") // its data directory knows the cluster
	// Before anyone knows where it is, it reaches them, and serves linearizable reads: healthy, as
	// machined's etcd-healthy task waits for.
	waitFor(ctx, t, "cp3 in its quorum at its new address", func() error { _, err := third.client().Names(ctx); return err })
	if after := nodes[1].probes(ctx, t, thirdID); after != before {
		t.Logf("cp2 reached cp3 %d times before its new address was published (want none: still the old one)", after-before)
	}
	must(t, third.client().PutName(ctx, third.name, third.ip.String()))
	publish(third)
	for _, n := range nodes[:2] {
		b := n.probes(ctx, t, thirdID)
		waitFor(ctx, t, n.name+" reaching cp3 by name at "+third.ip.String(), func() error {
			if got := n.probes(ctx, t, thirdID); got <= b {
				return fmt.Errorf("%d round trips to cp3, no more than before", got)
			}
			return nil
		})
	}
	// And the cluster goes on without the member that never moved: cp2 and cp3 are a quorum of three.
	first.etcd.Kill()
	waitFor(ctx, t, "a write with cp1 gone (a new leader first, when cp1 led)", func() error {
		return nodes[1].client().PutName(ctx, "probe", "10.89.0.99")
	})
	if got, err := third.client().Names(ctx); err != nil || got[third.name] != third.ip.String() {
		t.Errorf("records read from cp3 = %v, %v; want cp3 at %s", got, err, third.ip)
	}
}

type member struct {
	name        string
	ip          netip.Addr
	hosts, data string
	ns          *etcdtest.Namespace
	pki         etcdtest.PKI
	etcd        *etcdtest.Proc
	known       []*machine.Member // the members last written, which machined keeps on STATE
}

func (n *member) peerURL() string { return "https://" + n.name + ":2380" }

// start runs the member's etcd as machined renders it: URLs advertised by name, listened on by address.
func (n *member) start(t *testing.T, bin, initial string) {
	n.etcd = etcdtest.Start(t, etcdtest.Member{Bin: bin, Name: n.name, DataDir: n.data, PKI: n.pki,
		ClientURL: "https://" + n.name + ":2379", ListenClient: "https://" + n.ip.String() + ":2379",
		PeerURL: n.peerURL(), ListenPeer: "https://" + n.ip.String() + ":2380",
		InitialCluster: initial, NetNS: n.ns.Name, Hosts: n.hosts})
}

// client reaches the member by address from inside its namespace, as machined reaches its own.
func (n *member) client() *etcdops.Client {
	return &etcdops.Client{Endpoints: []string{"https://" + n.ip.String() + ":2379"}, CACert: n.pki.CA, Cert: n.pki.ClientCert,
		Key: n.pki.ClientKey, Timeout: 2 * time.Second, Dial: etcdtest.DialIn(n.ns.NS)}
}

// writeHosts writes the node's /etc/hosts as machined does: its own name, and the control planes' names
// (workload.Names) with this node's address first behind etcd.internal.
func (n *member) writeHosts(t *testing.T, members []*machine.Member) {
	t.Helper()
	members = append(slices.DeleteFunc(slices.Clone(members), func(m *machine.Member) bool { return m.Name == n.name }),
		&machine.Member{Name: n.name, Address: n.ip.String(), ControlPlane: true})
	n.known = members
	must(t, os.WriteFile(n.hosts, netcfg.Hosts(n.name, n.ip, workload.Names("demo", "", n.name, members)), 0o644))
}

// probes is how many times this member's prober has had an answer from the member id at its peer URL
// (etcd's etcd_network_peer_round_trip_time_seconds, on its metrics port in the namespace).
func (n *member) probes(ctx context.Context, t *testing.T, id uint64) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: etcdtest.DialIn(n.ns.NS)}, Timeout: 5 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:2381/metrics", nil)
	must(t, err)
	resp, err := hc.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	prefix := fmt.Sprintf("etcd_network_peer_round_trip_time_seconds_count{To=%q} ", strconv.FormatUint(id, 16))
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			c, _ := strconv.Atoi(v)
			return c
		}
	}
	return 0
}

func waitFor(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	start := time.Now()
	var err error
	for {
		if err = f(); err == nil {
			t.Logf("%s after %v", what, time.Since(start).Round(100*time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
