//go:build integration

package netcfg

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/cairn-os/cairn/api/config"
)

// newNamespace gives the test a network namespace of its own with NICs (veth pairs: the one named is the
// NIC, its peer stays down) and a netlink handle into it. Everything dies with the namespace.
func newNamespace(t *testing.T, nics ...string) *netlink.Handle {
	t.Helper()
	h, _ := newNamespaceWithHandle(t, nics...)
	return h
}

// newNamespaceWithHandle is newNamespace that also returns the namespace, to open sockets in it.
func newNamespaceWithHandle(t *testing.T, nics ...string) (*netlink.Handle, netns.NsHandle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // this thread is now in the new namespace
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); ns.Close() })
	for _, n := range nics {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n}, PeerName: n + "-peer"}); err != nil {
			t.Fatalf("add veth %s: %v", n, err)
		}
	}
	return h, ns
}

// requireLinkKinds skips the test when the kernel cannot make these kinds of link (a host kernel built
// without bonding or 802.1Q and no module to load; Debian's, which Cairn boots, has both).
func requireLinkKinds(t *testing.T, h *netlink.Handle) {
	t.Helper()
	probe := []netlink.Link{netlink.NewLinkBond(netlink.LinkAttrs{Name: "probe-bond"}),
		&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "probe-vlan", ParentIndex: 1}, VlanId: 2}}
	for _, l := range probe {
		if err := h.LinkAdd(l); err != nil {
			t.Skipf("this kernel cannot make a %s link: %v", l.Type(), err)
		}
		if err := h.LinkDel(l); err != nil {
			t.Fatal(err)
		}
	}
}

// TestApplyMachineConfig applies a machine config's network in a namespace of its own: a static address
// with its MTU and a route, resolvers and search domains, and an interface the machine does not have,
// which must be reported while the rest applies. A second Apply of the same plan changes nothing and
// fails nowhere.
func TestApplyMachineConfig(t *testing.T) {
	h := newNamespace(t, "nic0")
	cfg := &config.Network{Interfaces: []config.Interface{
		{Name: "nic0", Addresses: []string{"10.9.0.2/24"}, MTU: 1400,
			Routes: []config.Route{{Network: "10.99.0.0/16", Gateway: "10.9.0.1", Metric: 30}, {Network: "10.98.0.0/16"}}},
		{Name: "eth9", DHCP: true},
	}, Nameservers: []string{"10.9.0.53"}, Search: []string{"lab.example"}}
	c := applyTwice(t, h, []Link{{Name: "lo", Loopback: true}, {Name: "nic0"}}, cfg)

	nic0, err := h.LinkByName("nic0")
	if err != nil {
		t.Fatal(err)
	}
	if got := nic0.Attrs().MTU; got != 1400 {
		t.Errorf("nic0 MTU = %d, want 1400", got)
	}
	if got := addrs(t, h, "nic0"); !slices.Equal(got, []string{"10.9.0.2/24"}) {
		t.Errorf("nic0 addresses = %v, want [10.9.0.2/24]", got)
	}
	routes, err := c.Routes()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"10.99.0.0/16 via 10.9.0.1 dev nic0 metric 30", "10.98.0.0/16 dev nic0"} {
		if !slices.Contains(routes, want) {
			t.Errorf("Routes() = %q, want %q among them", routes, want)
		}
	}
	st := c.State()
	if diff := cmp.Diff([]netip.Addr{netip.MustParseAddr("10.9.0.53")}, st.Nameservers, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("State().Nameservers (-want +got):\n%s", diff)
	}
	if !slices.Equal(st.Search, []string{"lab.example"}) {
		t.Errorf("State().Search = %v, want [lab.example]", st.Search)
	}
	if want := []string{"machine.network.interfaces[1]: no interface eth9 (have [nic0])"}; !slices.Equal(st.Problems, want) {
		t.Errorf("State().Problems = %q, want %q", st.Problems, want)
	}
	if !st.Static["nic0"] {
		t.Errorf("State().Static = %v, want nic0 static", st.Static)
	}
}

// TestApplyBondAndVLAN makes an active-backup bond of two NICs and a VLAN with an address on it.
func TestApplyBondAndVLAN(t *testing.T) {
	h := newNamespace(t, "nic1", "nic2")
	requireLinkKinds(t, h)
	cfg := &config.Network{Interfaces: []config.Interface{
		{Name: "bond0", Bond: &config.Bond{Mode: config.BondActiveBackup, Interfaces: []string{"nic1", "nic2"}}},
		{Name: "bond0.7", VLAN: &config.VLAN{Parent: "bond0", ID: 7}, Addresses: []string{"10.7.0.2/24"}},
	}}
	applyTwice(t, h, []Link{{Name: "nic1"}, {Name: "nic2"}}, cfg)
	bond, err := h.LinkByName("bond0")
	if err != nil {
		t.Fatalf("bond0: %v", err)
	}
	if b, ok := bond.(*netlink.Bond); !ok || b.Mode != netlink.BOND_MODE_ACTIVE_BACKUP {
		t.Errorf("bond0 = %T %+v, want an active-backup bond", bond, bond)
	}
	for _, m := range []string{"nic1", "nic2"} {
		l, err := h.LinkByName(m)
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().MasterIndex != bond.Attrs().Index {
			t.Errorf("%s's master index = %d, want bond0's %d", m, l.Attrs().MasterIndex, bond.Attrs().Index)
		}
	}
	vlan, err := h.LinkByName("bond0.7")
	if err != nil {
		t.Fatalf("bond0.7: %v", err)
	}
	if v, ok := vlan.(*netlink.Vlan); !ok || v.VlanId != 7 || v.ParentIndex != bond.Attrs().Index {
		t.Errorf("bond0.7 = %+v, want VLAN 7 on bond0", vlan)
	}
	if got := addrs(t, h, "bond0.7"); !slices.Equal(got, []string{"10.7.0.2/24"}) {
		t.Errorf("bond0.7 addresses = %v, want [10.7.0.2/24]", got)
	}
}

// applyTwice plans cfg over links and applies it twice: the second Apply must find nothing to do and fail
// nowhere (a restart applies the config over what the last boot made).
func applyTwice(t *testing.T, h *netlink.Handle, links []Link, cfg *config.Network) *Configurator {
	t.Helper()
	plan, err := Make(links, nil, true, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &Configurator{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), NL: h}
	for round := 1; round <= 2; round++ {
		if err := c.Apply(context.Background(), plan, time.Second); err != nil {
			t.Fatalf("Apply() round %d = %v", round, err)
		}
	}
	return c
}

// TestApplyReportsWhatFails: a route through a gateway no interface reaches fails, with the interface and
// the route named, and the address before it is still applied.
func TestApplyReportsWhatFails(t *testing.T) {
	h := newNamespace(t, "nic0")
	plan, err := Make([]Link{{Name: "nic0"}}, nil, true, &config.Network{Interfaces: []config.Interface{
		{Name: "nic0", Addresses: []string{"10.9.0.2/24"}, Routes: []config.Route{{Network: "10.50.0.0/16", Gateway: "192.0.2.1"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := &Configurator{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), NL: h}
	err = c.Apply(context.Background(), plan, time.Second)
	want := "nic0: route to 10.50.0.0/16 via 192.0.2.1: network is unreachable"
	if err == nil || err.Error() != want {
		t.Errorf("Apply() = %v, want %q", err, want)
	}
	if got := c.State().Problems; !slices.Equal(got, []string{want}) {
		t.Errorf("State().Problems = %q, want [%q]", got, want)
	}
	if got := addrs(t, h, "nic0"); !slices.Equal(got, []string{"10.9.0.2/24"}) {
		t.Errorf("nic0 addresses = %v, want [10.9.0.2/24]", got)
	}
}

func addrs(t *testing.T, h *netlink.Handle, name string) []string {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	as, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		out = append(out, a.IPNet.String())
	}
	return out
}
