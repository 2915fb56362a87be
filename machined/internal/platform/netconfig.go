package platform

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cairn-os/cairn/api/config"
)

// A NoCloud seed's network-config (cloud-init's network configuration, versions 1 and 2: the ones
// Proxmox, libvirt's and OpenStack's tooling write) becomes the node's network until a machine config
// sets one. Only what Cairn's machine.network can say is read: physical interfaces (by MAC address or
// by name) with DHCP or static addresses, a gateway, routes, the MTU, resolvers and search domains. A
// key outside that is refused by name rather than ignored: a network the node half-applies is one it
// may not be reachable on. Keys that change nothing here (renderer, set-name, optional, dhcp6: false)
// are accepted.

// networkConfigLimit bounds network-config: a few interfaces fit in a few KiB.
const networkConfigLimit = 64 << 10

// ParseNetworkConfig reads network-config. macs maps this machine's MAC addresses (lower case) to its
// link names, for the interfaces the document matches by MAC.
func ParseNetworkConfig(raw []byte, macs map[string]string) (*config.Network, error) {
	var head struct {
		Version int `yaml:"version"`
		Network *struct {
			Version int `yaml:"version"`
		} `yaml:"network"`
	}
	if err := yaml.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("network-config: %w", err)
	}
	wrapped := head.Network != nil
	version := head.Version
	if wrapped {
		version = head.Network.Version
	}
	var n *config.Network
	var err error
	switch version {
	case 1:
		n, err = parseV1(raw, wrapped, macs)
	case 2:
		n, err = parseV2(raw, wrapped, macs)
	default:
		return nil, fmt.Errorf("network-config: version %d: Cairn reads versions 1 and 2", version)
	}
	if err == nil {
		err = n.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("network-config: %w", err)
	}
	return n, nil
}

// decodeStrict decodes raw (or its network: key) into v, refusing keys v does not have.
func decodeStrict(raw []byte, wrapped bool, v any) error {
	if wrapped {
		var w struct {
			Network yaml.Node `yaml:"network"`
		}
		if err := yaml.Unmarshal(raw, &w); err != nil {
			return err
		}
		out, err := yaml.Marshal(&w.Network)
		if err != nil {
			return err
		}
		raw = out
	}
	d := yaml.NewDecoder(bytes.NewReader(raw))
	d.KnownFields(true)
	return d.Decode(v)
}

type v2Config struct {
	Version   int                    `yaml:"version"`
	Renderer  string                 `yaml:"renderer"`
	Ethernets map[string]v2Interface `yaml:"ethernets"`
}

type v2Interface struct {
	Match *struct {
		MACAddress string `yaml:"macaddress"`
		Name       string `yaml:"name"`
	} `yaml:"match"`
	SetName     string    `yaml:"set-name"`
	Optional    bool      `yaml:"optional"`
	DHCP4       bool      `yaml:"dhcp4"`
	DHCP6       bool      `yaml:"dhcp6"`
	Addresses   []string  `yaml:"addresses"`
	Gateway4    string    `yaml:"gateway4"`
	MTU         int       `yaml:"mtu"`
	Routes      []v2Route `yaml:"routes"`
	Nameservers *struct {
		Addresses []string `yaml:"addresses"`
		Search    []string `yaml:"search"`
	} `yaml:"nameservers"`
}

type v2Route struct {
	To     string `yaml:"to"`
	Via    string `yaml:"via"`
	Metric int    `yaml:"metric"`
}

func parseV2(raw []byte, wrapped bool, macs map[string]string) (*config.Network, error) {
	var c v2Config
	if err := decodeStrict(raw, wrapped, &c); err != nil {
		return nil, err
	}
	n := &config.Network{}
	for _, id := range slices.Sorted(maps.Keys(c.Ethernets)) {
		e := c.Ethernets[id]
		if e.DHCP6 {
			return nil, fmt.Errorf("ethernets.%s.dhcp6: Cairn configures IPv6 addresses statically only", id)
		}
		name := id
		if e.Match != nil {
			var err error
			if name, err = matchLink(id, e.Match.MACAddress, e.Match.Name, macs); err != nil {
				return nil, err
			}
		}
		itf := config.Interface{Name: name, DHCP: e.DHCP4, Addresses: e.Addresses, Gateway: e.Gateway4, MTU: e.MTU}
		for _, r := range e.Routes {
			dst := r.To
			if dst == "default" {
				dst = "0.0.0.0/0"
			}
			itf.Routes = append(itf.Routes, config.Route{Network: dst, Gateway: r.Via, Metric: r.Metric})
		}
		n.Interfaces = append(n.Interfaces, itf)
		if e.Nameservers != nil {
			n.Nameservers = appendNew(n.Nameservers, e.Nameservers.Addresses...)
			n.Search = appendNew(n.Search, e.Nameservers.Search...)
		}
	}
	return n, nil
}

type v1Config struct {
	Version int        `yaml:"version"`
	Config  []v1Object `yaml:"config"`
}

// v1Object is one entry of a version 1 config: a physical interface or the resolvers.
type v1Object struct {
	Type       string       `yaml:"type"`
	Name       string       `yaml:"name"`
	MACAddress string       `yaml:"mac_address"`
	MTU        int          `yaml:"mtu"`
	Subnets    []v1Subnet   `yaml:"subnets"`
	Address    stringsOrOne `yaml:"address"` // nameserver
	Search     []string     `yaml:"search"`  // nameserver
}

type v1Subnet struct {
	Type           string   `yaml:"type"`
	Address        string   `yaml:"address"`
	Netmask        string   `yaml:"netmask"`
	Gateway        string   `yaml:"gateway"`
	DNSNameservers []string `yaml:"dns_nameservers"`
	DNSSearch      []string `yaml:"dns_search"`
	Routes         []struct {
		Network string `yaml:"network"`
		Netmask string `yaml:"netmask"`
		Gateway string `yaml:"gateway"`
		Metric  int    `yaml:"metric"`
	} `yaml:"routes"`
}

// stringsOrOne is a YAML string or list of strings (v1's nameserver address takes both).
type stringsOrOne []string

func (s *stringsOrOne) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = []string{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

func parseV1(raw []byte, wrapped bool, macs map[string]string) (*config.Network, error) {
	var c v1Config
	if err := decodeStrict(raw, wrapped, &c); err != nil {
		return nil, err
	}
	n := &config.Network{}
	for i, o := range c.Config {
		path := fmt.Sprintf("config[%d]", i)
		switch o.Type {
		case "nameserver":
			n.Nameservers = appendNew(n.Nameservers, o.Address...)
			n.Search = appendNew(n.Search, o.Search...)
			continue
		case "physical":
		default:
			return nil, fmt.Errorf("%s.type: %q: Cairn reads physical and nameserver entries (bonds and VLANs go in machine.network)", path, o.Type)
		}
		name := o.Name
		if o.MACAddress != "" {
			var err error
			if name, err = matchLink(path, o.MACAddress, "", macs); err != nil {
				return nil, err
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%s: a physical interface needs a name or a mac_address", path)
		}
		itf := config.Interface{Name: name, MTU: o.MTU}
		for j, s := range o.Subnets {
			sp := fmt.Sprintf("%s.subnets[%d]", path, j)
			switch s.Type {
			case "dhcp", "dhcp4":
				itf.DHCP = true
			case "static":
				a, err := v1Address(s.Address, s.Netmask)
				if err != nil {
					return nil, fmt.Errorf("%s.address: %w", sp, err)
				}
				itf.Addresses = append(itf.Addresses, a)
				if s.Gateway != "" {
					itf.Gateway = s.Gateway
				}
			default:
				return nil, fmt.Errorf("%s.type: %q: Cairn reads dhcp, dhcp4 and static subnets", sp, s.Type)
			}
			for _, r := range s.Routes {
				dst, err := v1Address(r.Network, r.Netmask)
				if err != nil {
					return nil, fmt.Errorf("%s.routes: %w", sp, err)
				}
				itf.Routes = append(itf.Routes, config.Route{Network: dst, Gateway: r.Gateway, Metric: r.Metric})
			}
			n.Nameservers = appendNew(n.Nameservers, s.DNSNameservers...)
			n.Search = appendNew(n.Search, s.DNSSearch...)
		}
		n.Interfaces = append(n.Interfaces, itf)
	}
	return n, nil
}

// v1Address is an address in CIDR notation, or an address and a netmask (255.255.255.0, ffff:ffff::).
func v1Address(addr, netmask string) (string, error) {
	if strings.Contains(addr, "/") || netmask == "" {
		return addr, nil
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return "", err
	}
	m, err := netip.ParseAddr(netmask)
	if err != nil || m.Is4() != a.Is4() {
		return "", fmt.Errorf("netmask %q is not a mask for %s", netmask, addr)
	}
	ones := 0
	for _, b := range m.AsSlice() {
		for i := 7; i >= 0; i-- {
			if b&(1<<i) == 0 {
				break
			}
			ones++
		}
	}
	return netip.PrefixFrom(a, ones).String(), nil
}

// matchLink finds the link an interface entry means: by MAC address on this machine, else by name
// (globs are not read: a pattern that matches several links would configure them all alike).
func matchLink(path, mac, name string, macs map[string]string) (string, error) {
	if mac != "" {
		if l, ok := macs[strings.ToLower(mac)]; ok {
			return l, nil
		}
		have := make([]string, 0, len(macs))
		for m, l := range macs {
			have = append(have, l+" "+m)
		}
		sort.Strings(have)
		return "", fmt.Errorf("%s: no interface has MAC address %s (this machine has %s)", path, mac, strings.Join(have, ", "))
	}
	if name == "" || strings.ContainsAny(name, "*?[") {
		return "", errors.New(path + ".match: name a MAC address or one interface (patterns are not read)")
	}
	return name, nil
}

func appendNew(list []string, xs ...string) []string {
	for _, x := range xs {
		if !slices.Contains(list, x) {
			list = append(list, x)
		}
	}
	return list
}
