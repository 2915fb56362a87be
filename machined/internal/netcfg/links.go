package netcfg

import (
	"fmt"
	"net"
	"slices"

	"github.com/vishvananda/netlink"
)

// makeLink creates the bond or VLAN itf plans, unless a link of that name and kind exists already (a
// second Apply, or a restart of machined), and enslaves a bond's members.
func (c *Configurator) makeLink(itf Iface) error {
	nl := c.nl()
	kind := "vlan"
	if itf.Bond != nil {
		kind = "bond"
	}
	if c.LoadModules != nil {
		// The kernel asks modprobe for these, and a Cairn node has none.
		if kind == "bond" {
			c.LoadModules("bonding")
		} else {
			c.LoadModules("8021q")
		}
	}
	existing, err := nl.LinkByName(itf.Name)
	switch {
	case err == nil && existing.Type() != kind:
		return fmt.Errorf("%s: a %s link of that name exists; the config asks for a %s", itf.Name, existing.Type(), kind)
	case err == nil:
		// Kept as it is: changing a live bond's mode or a VLAN's tag means deleting it, which a reboot does.
	case itf.Bond != nil:
		b := netlink.NewLinkBond(netlink.LinkAttrs{Name: itf.Name})
		b.Mode = netlink.StringToBondMode(itf.Bond.Mode)
		// The carrier of each member is checked every 100 ms: without it an active-backup bond never
		// notices that its active member lost its link.
		b.Miimon = 100
		if err := nl.LinkAdd(b); err != nil {
			return fmt.Errorf("%s: create %s bond: %w", itf.Name, itf.Bond.Mode, err)
		}
	default:
		parent, err := nl.LinkByName(itf.VLAN.Parent)
		if err != nil {
			return fmt.Errorf("%s: VLAN parent %s: %w", itf.Name, itf.VLAN.Parent, err)
		}
		v := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: itf.Name, ParentIndex: parent.Attrs().Index}, VlanId: itf.VLAN.ID}
		if err := nl.LinkAdd(v); err != nil {
			return fmt.Errorf("%s: create VLAN %d on %s: %w", itf.Name, itf.VLAN.ID, itf.VLAN.Parent, err)
		}
		if err := nl.LinkSetUp(parent); err != nil {
			return fmt.Errorf("%s: bring up VLAN parent %s: %w", itf.Name, itf.VLAN.Parent, err)
		}
	}
	if itf.Bond == nil {
		return nil
	}
	bond, err := nl.LinkByName(itf.Name)
	if err != nil {
		return fmt.Errorf("%s: %w", itf.Name, err)
	}
	for _, m := range itf.Bond.Members {
		link, err := nl.LinkByName(m)
		if err != nil {
			return fmt.Errorf("%s: member %s: %w", itf.Name, m, err)
		}
		if link.Attrs().MasterIndex == bond.Attrs().Index {
			continue
		}
		// The boot may have given the member DHCP and addresses; a member carries neither.
		c.stopDHCP(link)
		// The kernel enslaves only a link that is down.
		if err := nl.LinkSetDown(link); err != nil {
			return fmt.Errorf("%s: take member %s down: %w", itf.Name, m, err)
		}
		if err := nl.LinkSetMasterByIndex(link, bond.Attrs().Index); err != nil {
			return fmt.Errorf("%s: add member %s: %w", itf.Name, m, err)
		}
		if err := nl.LinkSetUp(link); err != nil {
			return fmt.Errorf("%s: bring member %s up: %w", itf.Name, m, err)
		}
		c.Log.Info("bond member", "bond", itf.Name, "interface", m)
	}
	return nil
}

// route adds or replaces one of an interface's routes.
func (c *Configurator) route(link netlink.Link, r Route) error {
	dst := &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen())}
	nr := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Priority: r.Metric}
	if r.Gateway.IsValid() {
		nr.Gw = r.Gateway.AsSlice()
	} else {
		nr.Scope = netlink.SCOPE_LINK
	}
	if err := c.nl().RouteReplace(nr); err != nil {
		via := "directly"
		if r.Gateway.IsValid() {
			via = "via " + r.Gateway.String()
		}
		return fmt.Errorf("%s: route to %s %s: %w", link.Attrs().Name, r.Dst, via, err)
	}
	if r.Dst.Bits() == 0 {
		c.mu.Lock()
		c.defaultIface = link.Attrs().Name
		c.mu.Unlock()
	}
	return nil
}

// Routes lists the main table's routes for status: "DST via GW dev IFACE metric N".
func (c *Configurator) Routes() ([]string, error) {
	rs, err := c.nl().RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	// Each route's link is asked for by its index, once: a running node has a veth per pod, and listing
	// every link with its attributes and counters to name two was half of Status's route work.
	names := map[int]string{}
	var out []string
	for _, r := range rs {
		name, seen := names[r.LinkIndex]
		if !seen {
			if l, err := c.nl().LinkByIndex(r.LinkIndex); err == nil {
				name = l.Attrs().Name
			}
			names[r.LinkIndex] = name
		}
		dst := "default"
		if r.Dst != nil && !(r.Dst.IP.IsUnspecified() && isZeroMask(r.Dst.Mask)) {
			dst = r.Dst.String()
		}
		s := dst
		if r.Gw != nil {
			s += " via " + r.Gw.String()
		}
		s += " dev " + name
		if r.Priority > 0 {
			s += fmt.Sprintf(" metric %d", r.Priority)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

func isZeroMask(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}
