package platform

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
)

// network_data.json as Nova writes it on a config drive.
const novaNetworkData = `{
  "links": [
    {"id": "tap1", "type": "ovs", "ethernet_mac_address": "FA:16:3E:00:00:01", "mtu": 1450, "vif_id": "x"},
    {"id": "tap2", "type": "phy", "ethernet_mac_address": "fa:16:3e:00:00:02", "mtu": 1500}
  ],
  "networks": [
    {"id": "network0", "type": "ipv4", "link": "tap1", "ip_address": "10.20.0.7", "netmask": "255.255.255.0",
     "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.20.0.1"},
                {"network": "172.16.0.0", "netmask": "255.255.0.0", "gateway": "10.20.0.254"}],
     "network_id": "n"},
    {"id": "network1", "type": "ipv6", "link": "tap1", "ip_address": "2001:db8::7", "netmask": "ffff:ffff:ffff:ffff::"},
    {"id": "network2", "type": "ipv4_dhcp", "link": "tap2"}
  ],
  "services": [{"type": "dns", "address": "10.20.0.2"}, {"type": "dns", "address": "2001:db8::2"}]
}`

func TestParseNetworkData(t *testing.T) {
	macs := map[string]string{"fa:16:3e:00:00:01": "eth0", "fa:16:3e:00:00:02": "eth1"}
	got, err := ParseNetworkData([]byte(novaNetworkData), macs)
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Network{Interfaces: []config.Interface{
		{Name: "eth0", MTU: 1450, Addresses: []string{"10.20.0.7/24", "2001:db8::7/64"}, Gateway: "10.20.0.1",
			Routes: []config.Route{{Network: "172.16.0.0/16", Gateway: "10.20.0.254"}}},
		{Name: "eth1", MTU: 1500, DHCP: true},
	}, Nameservers: []string{"10.20.0.2", "2001:db8::2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseNetworkData() (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"a bond", `{"links": [{"id": "b", "type": "bond", "ethernet_mac_address": "fa:16:3e:00:00:01"}]}`, `"bond"`},
		{"SLAAC", `{"links": [{"id": "l", "ethernet_mac_address": "fa:16:3e:00:00:01"}], "networks": [{"id": "n", "type": "ipv6_slaac", "link": "l"}]}`, "ipv6_slaac"},
		{"a network on no link", `{"networks": [{"id": "n", "type": "ipv4_dhcp", "link": "nope"}]}`, `"nope"`},
		{"a MAC not here", `{"links": [{"id": "l", "ethernet_mac_address": "02:00:00:00:00:09"}]}`, "02:00:00:00:00:09"},
		{"not JSON", `{`, "network_data.json"},
	} {
		if _, err := ParseNetworkData([]byte(tc.doc), macs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseNetworkData() = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
