package platform

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cairn-os/cairn/api/config"
)

// An OpenStack config drive's network_data.json (openstack/latest/network_data.json) is the node's
// network until a config sets one, as a NoCloud seed's network-config is. It names links by MAC address
// and puts networks on them: DHCP (ipv4_dhcp) or static (ipv4, ipv6) with their routes, and the
// resolvers in services. As for network-config, a link or network type Cairn cannot apply as written
// (a bond, a VLAN, DHCPv6, SLAAC) is refused by name.

type networkData struct {
	Links []struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		MAC  string `json:"ethernet_mac_address"`
		MTU  int    `json:"mtu"`
	} `json:"links"`
	Networks []struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Link      string `json:"link"`
		IPAddress string `json:"ip_address"`
		Netmask   string `json:"netmask"`
		Routes    []struct {
			Network string `json:"network"`
			Netmask string `json:"netmask"`
			Gateway string `json:"gateway"`
		} `json:"routes"`
	} `json:"networks"`
	Services []struct {
		Type    string `json:"type"`
		Address string `json:"address"`
	} `json:"services"`
}

// ParseNetworkData reads network_data.json; macs maps this machine's MAC addresses (lower case) to its
// link names.
func ParseNetworkData(raw []byte, macs map[string]string) (*config.Network, error) {
	var d networkData
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("network_data.json: %w", err)
	}
	n := &config.Network{}
	links := map[string]int{} // link id → index in n.Interfaces
	for i, l := range d.Links {
		path := fmt.Sprintf("network_data.json: links[%d] (%s)", i, l.ID)
		switch l.Type {
		case "phy", "ethernet", "ovs", "bridge", "tap", "vif", "":
		default:
			return nil, fmt.Errorf("%s: type %q: Cairn configures physical links from metadata (bonds and VLANs go in machine.network)", path, l.Type)
		}
		name, err := matchLink(path, l.MAC, "", macs)
		if err != nil {
			return nil, err
		}
		links[l.ID] = len(n.Interfaces)
		n.Interfaces = append(n.Interfaces, config.Interface{Name: name, MTU: l.MTU})
	}
	for i, nw := range d.Networks {
		path := fmt.Sprintf("network_data.json: networks[%d] (%s)", i, nw.ID)
		at, ok := links[nw.Link]
		if !ok {
			return nil, fmt.Errorf("%s: link %q is not among the links", path, nw.Link)
		}
		itf := &n.Interfaces[at]
		switch nw.Type {
		case "ipv4_dhcp":
			itf.DHCP = true
		case "ipv4", "ipv6":
			a, err := v1Address(nw.IPAddress, nw.Netmask)
			if err != nil {
				return nil, fmt.Errorf("%s: ip_address: %w", path, err)
			}
			itf.Addresses = append(itf.Addresses, a)
			for _, r := range nw.Routes {
				dst, err := v1Address(r.Network, r.Netmask)
				if err != nil {
					return nil, fmt.Errorf("%s: routes: %w", path, err)
				}
				if dst == "0.0.0.0/0" && itf.Gateway == "" {
					itf.Gateway = r.Gateway
					continue
				}
				itf.Routes = append(itf.Routes, config.Route{Network: dst, Gateway: r.Gateway})
			}
		default:
			return nil, fmt.Errorf("%s: type %q: Cairn reads ipv4_dhcp, ipv4 and ipv6 networks", path, nw.Type)
		}
	}
	for _, s := range d.Services {
		if s.Type == "dns" && !strings.Contains(s.Address, "/") {
			n.Nameservers = appendNew(n.Nameservers, s.Address)
		}
	}
	if err := n.Validate(); err != nil {
		return nil, fmt.Errorf("network_data.json: %w", err)
	}
	return n, nil
}
