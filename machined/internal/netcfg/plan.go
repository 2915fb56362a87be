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
	// Static says the addresses were given (ip= or config), which makes them the node's preferred address.
	Static bool
}

// Plan is the whole network plan.
type Plan struct {
	Ifaces      []Iface
	Nameservers []netip.Addr
	Hostname    string
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
	if c != nil {
		for i, ci := range c.Interfaces {
			itf, ok := byName[ci.Name]
			if !ok {
				return p, fmt.Errorf("machine.network.interfaces[%d]: no interface %s (have %v)", i, ci.Name, names)
			}
			*itf = Iface{Name: ci.Name, DHCP: ci.DHCP, MTU: ci.MTU, Static: len(ci.Addresses) > 0}
			for _, a := range ci.Addresses {
				pfx, err := netip.ParsePrefix(a)
				if err != nil {
					return p, fmt.Errorf("machine.network.interfaces[%d].addresses: %w", i, err)
				}
				itf.Addrs = append(itf.Addrs, pfx)
			}
			if ci.Gateway != "" {
				g, err := netip.ParseAddr(ci.Gateway)
				if err != nil {
					return p, fmt.Errorf("machine.network.interfaces[%d].gateway: %w", i, err)
				}
				itf.Gateway = g
			}
		}
		for _, ns := range c.Nameservers {
			a, err := netip.ParseAddr(ns)
			if err != nil {
				return p, fmt.Errorf("machine.network.nameservers: %w", err)
			}
			p.Nameservers = append(p.Nameservers, a)
		}
	}
	for _, n := range names {
		p.Ifaces = append(p.Ifaces, *byName[n])
	}
	return p, nil
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
