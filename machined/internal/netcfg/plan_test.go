package netcfg

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/cmdline"
)

var links = []Link{{Name: "lo", Loopback: true}, {Name: "eth1"}, {Name: "eth0"}}

func ipArg(t *testing.T, s string) []cmdline.IPConfig {
	c, err := cmdline.ParseIP(s)
	if err != nil {
		t.Fatal(err)
	}
	return []cmdline.IPConfig{*c}
}

func TestMake(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name   string
		ips    []cmdline.IPConfig
		noAuto bool
		cfg    *config.Network
		want   []Iface
		// problems are what the plan cannot do on this machine
		problems []string
		bad      string
	}{
		{name: "DHCP everywhere by default", want: []Iface{{Name: "eth0", DHCP: true}, {Name: "eth1", DHCP: true}}},
		{name: "ip= names eth1, eth0 keeps DHCP", ips: ipArg(t, "10.5.0.3::10.5.0.1:24::eth1:none"),
			want: []Iface{{Name: "eth0", DHCP: true}, {Name: "eth1", Addrs: []netip.Prefix{pfx("10.5.0.3/24")}, Gateway: netip.MustParseAddr("10.5.0.1"), Static: true}}},
		{name: "ip= without device takes the first link", ips: ipArg(t, "10.0.2.20:::255.255.255.0"),
			want: []Iface{{Name: "eth0", Addrs: []netip.Prefix{pfx("10.0.2.20/24")}, Static: true}, {Name: "eth1", DHCP: true}}},
		{name: "ip=off turns automatic DHCP off", noAuto: true, want: []Iface{{Name: "eth0"}, {Name: "eth1"}}},
		{name: "config wins", ips: ipArg(t, "10.5.0.3:::::eth1:none"),
			cfg:  &config.Network{Interfaces: []config.Interface{{Name: "eth1", Addresses: []string{"192.168.1.9/24"}, MTU: 1400}}},
			want: []Iface{{Name: "eth0", DHCP: true}, {Name: "eth1", Addrs: []netip.Prefix{pfx("192.168.1.9/24")}, MTU: 1400, Static: true}}},
		{name: "unknown device", ips: ipArg(t, "10.5.0.3:::::eth7:none"), bad: "no interface eth7"},
		{name: "bond of both NICs with a VLAN on it, routes",
			cfg: &config.Network{Interfaces: []config.Interface{
				{Name: "bond0.7", VLAN: &config.VLAN{Parent: "bond0", ID: 7}, Addresses: []string{"10.7.0.2/24"},
					Routes: []config.Route{{Network: "10.70.1.9/16", Gateway: "10.7.0.1", Metric: 20}, {Network: "10.71.0.0/16"}}},
				{Name: "bond0", Bond: &config.Bond{Mode: config.BondActiveBackup, Interfaces: []string{"eth0", "eth1"}}, DHCP: true},
			}},
			want: []Iface{{Name: "eth0"}, {Name: "eth1"},
				{Name: "bond0", DHCP: true, Bond: &Bond{Mode: "active-backup", Members: []string{"eth0", "eth1"}}},
				{Name: "bond0.7", VLAN: &VLAN{Parent: "bond0", ID: 7}, Addrs: []netip.Prefix{pfx("10.7.0.2/24")}, Static: true,
					Routes: []Route{{Dst: pfx("10.70.0.0/16"), Gateway: netip.MustParseAddr("10.7.0.1"), Metric: 20}, {Dst: pfx("10.71.0.0/16")}}},
			}},
		{name: "a NIC this machine lacks is a problem, not a failure",
			cfg: &config.Network{Interfaces: []config.Interface{{Name: "eth9", DHCP: true},
				{Name: "eth1", Addresses: []string{"10.5.0.9/24"}}}},
			want:     []Iface{{Name: "eth0", DHCP: true}, {Name: "eth1", Addrs: []netip.Prefix{pfx("10.5.0.9/24")}, Static: true}},
			problems: []string{"machine.network.interfaces[0]: no interface eth9 (have [eth0 eth1])"}},
		{name: "a bond whose NICs are all missing",
			cfg: &config.Network{Interfaces: []config.Interface{
				{Name: "bond1", Bond: &config.Bond{Mode: config.BondLACP, Interfaces: []string{"eth5"}}},
				{Name: "bond1.3", VLAN: &config.VLAN{Parent: "eth6", ID: 3}}}},
			want: []Iface{{Name: "eth0", DHCP: true}, {Name: "eth1", DHCP: true}},
			problems: []string{
				"machine.network.interfaces[0].bond.interfaces[0]: no interface eth5 (have [eth0 eth1])",
				"machine.network.interfaces[0]: bond bond1 has none of its interfaces on this machine",
				"machine.network.interfaces[1].vlan.parent: no interface eth6 (have [eth0 eth1])"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Make(links, tc.ips, tc.noAuto, tc.cfg)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("Make() = %v, want error %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, p.Ifaces, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
				cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("Make() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.problems, p.Problems); diff != "" {
				t.Errorf("Make() problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeIPPrefersStatic(t *testing.T) {
	p, _ := Make(links, ipArg(t, "10.5.0.3:::::eth1:none"), false, nil)
	cur := map[string][]netip.Prefix{"eth0": {netip.MustParsePrefix("10.0.2.15/24")}, "eth1": {netip.MustParsePrefix("10.5.0.3/24")}}
	if ip, _ := NodeIP(p, cur, "eth0"); ip.String() != "10.5.0.3" {
		t.Errorf("NodeIP = %s, want the static 10.5.0.3 over the NAT address", ip)
	}
	p, _ = Make(links, nil, false, nil)
	if ip, _ := NodeIP(p, cur, "eth0"); ip.String() != "10.0.2.15" {
		t.Errorf("NodeIP = %s, want the default route's 10.0.2.15", ip)
	}
}

func TestFiles(t *testing.T) {
	got := string(ResolvConf([]netip.Addr{netip.MustParseAddr("10.0.2.3"), netip.MustParseAddr("10.0.2.3")}, nil))
	if strings.Count(got, "nameserver") != 1 {
		t.Errorf("ResolvConf repeats a server:\n%s", got)
	}
	h := string(Hosts("cp1", netip.MustParseAddr("10.5.0.2"), map[string][]netip.Addr{"api.internal.demo": {netip.MustParseAddr("10.5.0.2")}}))
	for _, want := range []string{"127.0.0.1 localhost", "10.5.0.2 cp1", "10.5.0.2 api.internal.demo"} {
		if !strings.Contains(h, want) {
			t.Errorf("Hosts lacks %q:\n%s", want, h)
		}
	}
}
