// Package netcfg configures the node's network: which link gets DHCP or static addresses (from the
// kernel's ip= parameters or the machine config), the hostname, /etc/resolv.conf and /etc/hosts. The
// decision is a pure plan; applying it goes through netlink and a DHCP client.
package netcfg

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/cmdline"
)

// Link is a network interface as found on the machine.
type Link struct {
	Name     string
	Loopback bool
}

// Iface is the plan for one interface.
type Iface struct {
	Name    string
	DHCP    bool
	Addrs   []netip.Prefix
	Gateway netip.Addr
	MTU     int
	Routes  []Route
	// Static says the addresses were given (ip= or config), which makes them the node's preferred address.
	Static bool
	// Bond, when set, makes this a bond Cairn creates of these NICs (which get no plan of their own).
	Bond *Bond
	// VLAN, when set, makes this a VLAN Cairn creates on another interface.
	VLAN *VLAN
}

// Bond is a bond's mode (as the kernel names it) and its members.
type Bond struct {
	Mode    string
	Members []string
}

// VLAN is a VLAN's parent and tag.
type VLAN struct {
	Parent string
	ID     int
}

// Route is one route of an interface; an invalid Gateway means a link-scope route.
type Route struct {
	Dst     netip.Prefix
	Gateway netip.Addr
	Metric  int
}

// Plan is the whole network plan.
type Plan struct {
	Ifaces      []Iface
	Nameservers []netip.Addr
	// OwnDNS says Nameservers are the machine config's: they replace what DHCP offers.
	OwnDNS   bool
	Search   []string
	Hostname string
	// Problems are parts of the machine config that cannot be applied on this machine (an interface it
	// does not have); the rest of the plan applies, so the API stays reachable on what works.
	Problems []string
}

// Make decides the configuration. The machine config, when it lists interfaces, is the whole truth for
// those interfaces; ip= parameters name theirs (one without a device takes the first link); every other
// link gets DHCP, unless ip=off said no automatic configuration.
func Make(links []Link, ips []cmdline.IPConfig, noAuto bool, c *config.Network) (Plan, error) {
	var p Plan
	byName := map[string]*Iface{}
	var names []string
	for _, l := range links {
		if l.Loopback {
			continue
		}
		names = append(names, l.Name)
		byName[l.Name] = &Iface{Name: l.Name, DHCP: !noAuto}
	}
	sort.Strings(names)
	for _, ip := range ips {
		dev := ip.Device
		if dev == "" {
			if len(names) == 0 {
				return p, fmt.Errorf("ip= without a device, but the machine has no network interface")
			}
			dev = names[0]
		}
		itf, ok := byName[dev]
		if !ok {
			return p, fmt.Errorf("ip=...:%s: no interface %s (have %v)", dev, dev, names)
		}
		*itf = Iface{Name: dev, DHCP: ip.DHCP, Gateway: ip.Gateway}
		if ip.Address.IsValid() {
			itf.Addrs, itf.Static = []netip.Prefix{netip.PrefixFrom(ip.Address, ip.Prefix)}, true
		}
		p.Nameservers = append(p.Nameservers, ip.DNS...)
		if ip.Hostname != "" {
			p.Hostname = ip.Hostname
		}
	}
	var virtual []Iface
	if c != nil {
		virtual = p.fromConfig(c, byName, names)
	}
	for _, n := range names {
		p.Ifaces = append(p.Ifaces, *byName[n])
	}
	// Bonds before VLANs, so that a VLAN's parent bond exists when the VLAN is made.
	sort.SliceStable(virtual, func(i, j int) bool { return virtual[i].Bond != nil && virtual[j].Bond == nil })
	p.Ifaces = append(p.Ifaces, virtual...)
	return p, nil
}

// fromConfig lays the machine config's interfaces over the boot's plan (byName, the machine's NICs). It
// returns the bonds and VLANs to create; what this machine cannot do goes to p.Problems.
func (p *Plan) fromConfig(c *config.Network, byName map[string]*Iface, names []string) []Iface {
	var virtual []Iface
	for i, ci := range c.Interfaces {
		path := fmt.Sprintf("machine.network.interfaces[%d]", i)
		itf, err := configIface(path, ci)
		if err != nil {
			p.Problems = append(p.Problems, err.Error())
			continue
		}
		switch {
		case ci.Bond != nil:
			var members []string
			for j, m := range ci.Bond.Interfaces {
				nic, ok := byName[m]
				if !ok {
					p.Problems = append(p.Problems, fmt.Sprintf("%s.bond.interfaces[%d]: no interface %s (have %v)", path, j, m, names))
					continue
				}
				// A member carries no address of its own and asks no DHCP server.
				*nic = Iface{Name: m}
				members = append(members, m)
			}
			if len(members) == 0 {
				p.Problems = append(p.Problems, fmt.Sprintf("%s: bond %s has none of its interfaces on this machine", path, ci.Name))
				continue
			}
			itf.Bond = &Bond{Mode: ci.Bond.Mode, Members: members}
			virtual = append(virtual, itf)
		case ci.VLAN != nil:
			if _, ok := byName[ci.VLAN.Parent]; !ok && !isBond(c, ci.VLAN.Parent) {
				p.Problems = append(p.Problems, fmt.Sprintf("%s.vlan.parent: no interface %s (have %v)", path, ci.VLAN.Parent, names))
				continue
			}
			itf.VLAN = &VLAN{Parent: ci.VLAN.Parent, ID: ci.VLAN.ID}
			virtual = append(virtual, itf)
		default:
			if _, ok := byName[ci.Name]; !ok {
				p.Problems = append(p.Problems, fmt.Sprintf("%s: no interface %s (have %v)", path, ci.Name, names))
				continue
			}
			*byName[ci.Name] = itf
		}
	}
	if len(c.Nameservers) > 0 {
		// The config's resolvers replace those of ip= (and DHCP's, see Configurator).
		p.Nameservers, p.OwnDNS = nil, true
	}
	for i, ns := range c.Nameservers {
		a, err := netip.ParseAddr(ns)
		if err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("machine.network.nameservers[%d]: %v", i, err))
			continue
		}
		p.Nameservers = append(p.Nameservers, a)
	}
	p.Search = append(p.Search, c.Search...)
	return virtual
}

// configIface turns one config interface into its plan, without its bond or VLAN.
func configIface(path string, ci config.Interface) (Iface, error) {
	itf := Iface{Name: ci.Name, DHCP: ci.DHCP, MTU: ci.MTU, Static: len(ci.Addresses) > 0}
	for j, a := range ci.Addresses {
		pfx, err := netip.ParsePrefix(a)
		if err != nil {
			return itf, fmt.Errorf("%s.addresses[%d]: %w", path, j, err)
		}
		itf.Addrs = append(itf.Addrs, pfx)
	}
	if ci.Gateway != "" {
		g, err := netip.ParseAddr(ci.Gateway)
		if err != nil {
			return itf, fmt.Errorf("%s.gateway: %w", path, err)
		}
		itf.Gateway = g
	}
	for j, r := range ci.Routes {
		dst, err := netip.ParsePrefix(r.Network)
		if err != nil {
			return itf, fmt.Errorf("%s.routes[%d].network: %w", path, j, err)
		}
		rt := Route{Dst: dst.Masked(), Metric: r.Metric}
		if r.Gateway != "" {
			if rt.Gateway, err = netip.ParseAddr(r.Gateway); err != nil {
				return itf, fmt.Errorf("%s.routes[%d].gateway: %w", path, j, err)
			}
		}
		itf.Routes = append(itf.Routes, rt)
	}
	return itf, nil
}

func isBond(c *config.Network, name string) bool {
	for _, ci := range c.Interfaces {
		if ci.Name == name && ci.Bond != nil {
			return true
		}
	}
	return false
}

// NodeIP picks the node's address for Kubernetes among the configured ones: a static address first (on
// a multi-NIC VM the DHCP one is often a NAT address every node shares), else the DHCP address of the
// interface with the default route, else any.
func NodeIP(p Plan, current map[string][]netip.Prefix, defaultRouteIface string) (netip.Addr, bool) {
	for _, itf := range p.Ifaces {
		if itf.Static && len(itf.Addrs) > 0 {
			return itf.Addrs[0].Addr(), true
		}
	}
	if a := current[defaultRouteIface]; len(a) > 0 {
		return a[0].Addr(), true
	}
	for _, itf := range p.Ifaces {
		if a := current[itf.Name]; len(a) > 0 {
			return a[0].Addr(), true
		}
	}
	return netip.Addr{}, false
}
