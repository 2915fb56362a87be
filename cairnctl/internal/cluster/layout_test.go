package cluster

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name          string
		cps, workers  int
		wantNames     []string
		wantAddresses []string
		wantRoles     []string
	}{
		{"one", 1, 0, []string{"one-cp1"}, []string{"10.5.0.2"}, []string{RoleControlPlane}},
		{"demo", 1, 2, []string{"demo-cp1", "demo-w1", "demo-w2"}, []string{"10.5.0.2", "10.5.0.3", "10.5.0.4"},
			[]string{RoleControlPlane, RoleWorker, RoleWorker}},
		{"ha", 3, 1, []string{"ha-cp1", "ha-cp2", "ha-cp3", "ha-w1"}, []string{"10.5.0.2", "10.5.0.3", "10.5.0.4", "10.5.0.5"},
			[]string{RoleControlPlane, RoleControlPlane, RoleControlPlane, RoleWorker}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Plan(tt.name, tt.cps, tt.workers, nil)
			if err != nil {
				t.Fatalf("Plan(%q, %d, %d) = %v", tt.name, tt.cps, tt.workers, err)
			}
			var names, addrs, roles []string
			macs := map[string]bool{}
			for _, n := range l.Nodes {
				names, addrs, roles = append(names, n.Name), append(addrs, n.Address.String()), append(roles, n.Role)
				hw, err := net.ParseMAC(n.MAC)
				if err != nil {
					t.Errorf("node %s: MAC %q: %v", n.Name, n.MAC, err)
					continue
				}
				if hw[0]&1 != 0 || hw[0]&2 == 0 {
					t.Errorf("node %s: MAC %s must be unicast and locally administered", n.Name, n.MAC)
				}
				if macs[n.MAC] {
					t.Errorf("node %s: MAC %s is used twice", n.Name, n.MAC)
				}
				macs[n.MAC] = true
				if want := n.Address.String() + "/24"; n.Prefix() != want {
					t.Errorf("node %s: Prefix() = %s, want %s", n.Name, n.Prefix(), want)
				}
			}
			for _, d := range []struct {
				what      string
				got, want []string
			}{{"names", names, tt.wantNames}, {"addresses", addrs, tt.wantAddresses}, {"roles", roles, tt.wantRoles}} {
				if diff := cmp.Diff(d.want, d.got); diff != "" {
					t.Errorf("Plan(%q) %s (-want +got):\n%s", tt.name, d.what, diff)
				}
			}
			if want := "https://10.5.0.2:6443"; l.Endpoint() != want {
				t.Errorf("Endpoint() = %s, want %s", l.Endpoint(), want)
			}
			host, port, err := net.SplitHostPort(l.Group)
			if err != nil || host != mcastGroup || !netip.MustParseAddr(host).IsMulticast() {
				t.Errorf("Group = %q, want %s:PORT", l.Group, mcastGroup)
			}
			if port < "20000" || port > "29999" || len(port) != 5 {
				t.Errorf("Group port %s outside %d-%d", port, portBase, portBase+portSpan-1)
			}
		})
	}
}

// The multicast group is stable for a name (so a re-created cluster looks the same), differs between
// names, and never repeats a group another cluster uses.
func TestPlanGroup(t *testing.T) {
	a1, _ := Plan("alpha", 1, 0, nil)
	a2, _ := Plan("alpha", 1, 0, nil)
	b, _ := Plan("beta", 1, 0, nil)
	if a1.Group != a2.Group {
		t.Errorf("Plan(alpha) groups differ between calls: %s, %s", a1.Group, a2.Group)
	}
	if a1.Group == b.Group {
		t.Errorf("Plan(alpha) and Plan(beta) share group %s", a1.Group)
	}
	taken, _ := Plan("alpha", 1, 0, []string{a1.Group})
	if taken.Group == a1.Group {
		t.Errorf("Plan(alpha, used %s) = the same group, want another", a1.Group)
	}
	// MACs differ between clusters too, which keeps captures of two clusters readable.
	if a1.Nodes[0].MAC == b.Nodes[0].MAC {
		t.Errorf("clusters alpha and beta share MAC %s", a1.Nodes[0].MAC)
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct {
		name         string
		cps, workers int
		want         string
	}{
		{"Bad_Name", 1, 0, "must be 1-32 lowercase"},
		{"", 1, 0, "must be 1-32 lowercase"},
		{"-x", 1, 0, "must be 1-32 lowercase"},
		{strings.Repeat("a", 33), 1, 0, "must be 1-32 lowercase"},
		{"ok", 0, 1, "at least one control plane"},
		{"ok", 1, -1, "must not be negative"},
		{"ok", 200, 100, "do not fit"},
	}
	for _, tt := range tests {
		_, err := Plan(tt.name, tt.cps, tt.workers, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Plan(%q, %d, %d) = %v, want an error with %q", tt.name, tt.cps, tt.workers, err, tt.want)
		}
	}
	if _, err := Plan("full", 253, 0, nil); err != nil {
		t.Errorf("Plan(253 nodes) = %v, want them to fit 10.5.0.2-254", err)
	}
}

func TestGrow(t *testing.T) {
	l, err := Plan("dev", 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := Grow("dev", l.Nodes, RoleWorker, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	cp2, err := Grow("dev", append(l.Nodes, w2), RoleControlPlane, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	// What Plan would have made for the same nodes, in address order.
	want, _ := Plan("dev", 1, 2, nil)
	if w2 != want.Nodes[2] {
		t.Errorf("Grow(worker) = %+v, want %+v", w2, want.Nodes[2])
	}
	if cp2.Name != "dev-cp2" || cp2.Address != netip.MustParseAddr("10.5.0.5") || cp2.MAC == w2.MAC {
		t.Errorf("Grow(controlplane) = %+v, want dev-cp2 at 10.5.0.5 with its own MAC", cp2)
	}

	full, err := Plan("big", 1, 252, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Grow("big", full.Nodes, RoleWorker, netip.Addr{}); err == nil || !strings.Contains(err.Error(), "no address left") {
		t.Errorf("Grow of a full L2 = %v, want no address left", err)
	}
	if _, err := Grow("dev", l.Nodes, "boss", netip.Addr{}); err == nil || !strings.Contains(err.Error(), "boss") {
		t.Errorf("Grow(boss) = %v, want an error naming the role", err)
	}
}

func TestVIP(t *testing.T) {
	l, err := Plan("dev", 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Endpoint(); got != "https://10.5.0.2:6443" {
		t.Errorf("Endpoint() without a VIP = %q, want the first control plane's address", got)
	}
	for _, bad := range []struct{ vip, err string }{
		{"10.5.0.3", "is node dev-cp2's address"},
		{"10.6.0.9", "not a host address of the cluster's L2"},
		{"10.5.0.255", "not a host address"},
		{"ten", "not an IP address"},
	} {
		if err := l.SetVIP(bad.vip); err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("SetVIP(%s) = %v, want an error containing %q", bad.vip, err, bad.err)
		}
	}
	if err := l.SetVIP("10.5.0.5"); err != nil {
		t.Fatalf("SetVIP(10.5.0.5) = %v", err)
	}
	if got := l.Endpoint(); got != "https://10.5.0.5:6443" {
		t.Errorf("Endpoint() with a VIP = %q, want the VIP's", got)
	}
	// The next node skips the VIP.
	n, err := Grow("dev", l.Nodes, RoleWorker, l.VIP)
	if err != nil || n.Address != netip.MustParseAddr("10.5.0.6") {
		t.Errorf("Grow() next to the VIP = %+v, %v, want 10.5.0.6", n, err)
	}
	c, err := GenerateConfigs("dev", l, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	for name, nc := range c.Nodes {
		if nc.Cluster.VIP != "10.5.0.5" || nc.Cluster.Endpoint != "https://10.5.0.5:6443" {
			t.Errorf("%s: cluster.vip %q endpoint %q, want the VIP in both", name, nc.Cluster.VIP, nc.Cluster.Endpoint)
		}
		if err := config.Validate(nc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
