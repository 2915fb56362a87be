package platform

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
)

func TestParseNetworkConfig(t *testing.T) {
	macs := map[string]string{"52:54:00:12:34:56": "eth0", "52:54:00:ab:cd:ef": "eth1"}
	for _, tc := range []struct {
		name, doc string
		want      *config.Network
	}{
		{"v2 by MAC, static, as libvirt writes it", `
version: 2
ethernets:
  id0:
    match:
      macaddress: "52:54:00:AB:CD:EF"
    set-name: eth1
    addresses: [10.9.0.5/24]
    gateway4: 10.9.0.1
    routes:
      - to: 192.168.7.0/24
        via: 10.9.0.254
        metric: 50
    nameservers:
      addresses: [10.9.0.53]
      search: [lab.example]
`, &config.Network{Interfaces: []config.Interface{{Name: "eth1", Addresses: []string{"10.9.0.5/24"}, Gateway: "10.9.0.1",
			Routes: []config.Route{{Network: "192.168.7.0/24", Gateway: "10.9.0.254", Metric: 50}}}},
			Nameservers: []string{"10.9.0.53"}, Search: []string{"lab.example"}}},
		{"v2 under network:, DHCP by name", `
network:
  version: 2
  renderer: networkd
  ethernets:
    eth0: {dhcp4: true, optional: true}
`, &config.Network{Interfaces: []config.Interface{{Name: "eth0", DHCP: true}}}},
		{"v1 as Proxmox writes it", `
version: 1
config:
    - type: physical
      name: eth0
      mac_address: '52:54:00:12:34:56'
      mtu: 1450
      subnets:
      - type: static
        address: '10.8.0.7'
        netmask: '255.255.255.0'
        gateway: '10.8.0.1'
    - type: nameserver
      address:
      - '10.8.0.2'
      search:
      - 'pve.lan'
`, &config.Network{Interfaces: []config.Interface{{Name: "eth0", MTU: 1450, Addresses: []string{"10.8.0.7/24"}, Gateway: "10.8.0.1"}},
			Nameservers: []string{"10.8.0.2"}, Search: []string{"pve.lan"}}},
		{"v1 DHCP, a resolver as one string", `
version: 1
config:
  - {type: physical, name: eth1, subnets: [{type: dhcp}]}
  - {type: nameserver, address: 1.1.1.1}
`, &config.Network{Interfaces: []config.Interface{{Name: "eth1", DHCP: true}}, Nameservers: []string{"1.1.1.1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNetworkConfig([]byte(tc.doc), macs)
			if err != nil {
				t.Fatalf("ParseNetworkConfig() = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseNetworkConfig() (-want +got):\n%s", diff)
			}
		})
	}
}

// What Cairn cannot apply as written is refused, naming the key or the value.
func TestParseNetworkConfigRefuses(t *testing.T) {
	macs := map[string]string{"52:54:00:12:34:56": "eth0"}
	for _, tc := range []struct{ name, doc, want string }{
		{"an unknown key", "version: 2\nethernets:\n  eth0: {dhcp4: true, wakeonlan: true}\n", "wakeonlan"},
		{"a MAC address not on this machine", "version: 2\nethernets:\n  x: {match: {macaddress: '02:00:00:00:00:01'}, dhcp4: true}\n", "eth0 52:54:00:12:34:56"},
		{"a name pattern", "version: 2\nethernets:\n  x: {match: {name: 'en*'}, dhcp4: true}\n", "patterns"},
		{"DHCPv6", "version: 2\nethernets:\n  eth0: {dhcp6: true}\n", "dhcp6"},
		{"version 3", "version: 3\n", "version 3"},
		{"a bond in v1", "version: 1\nconfig:\n  - {type: bond, name: bond0}\n", `"bond"`},
		{"an address that is not one", "version: 2\nethernets:\n  eth0: {addresses: [10.0.0.300/24]}\n", "10.0.0.300"},
		{"not YAML", "version: [\n", "network-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNetworkConfig([]byte(tc.doc), macs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseNetworkConfig() = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
