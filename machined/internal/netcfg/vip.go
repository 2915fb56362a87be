package netcfg

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/vishvananda/netlink"
)

// VIPLink puts the cluster's virtual IP on this node (vip.Link): as a host address (/32, /128) on the
// link whose own subnet holds it, so it adds no route of its own, and announces it with gratuitous ARP.
type VIPLink struct {
	NL *netlink.Handle // nil: the current network namespace
}

func (v VIPLink) nl() *netlink.Handle {
	if v.NL != nil {
		return v.NL
	}
	return &netlink.Handle{}
}

// Add implements vip.Link.
func (v VIPLink) Add(vip netip.Addr) (string, error) {
	link, err := v.linkFor(vip)
	if err != nil {
		return "", err
	}
	a := netlinkAddr(netip.PrefixFrom(vip, vip.BitLen()))
	if err := v.nl().AddrReplace(link, a); err != nil {
		return "", fmt.Errorf("add %s to %s: %w", vip, link.Attrs().Name, err)
	}
	return link.Attrs().Name, nil
}

// linkFor finds the link with an address of its own (not the VIP) in a subnet that holds vip.
func (v VIPLink) linkFor(vip netip.Addr) (netlink.Link, error) {
	links, err := v.nl().LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var subnets []string
	for _, l := range links {
		addrs, err := v.nl().AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			p, ok := prefixOf(a)
			if !ok || p.Addr() == vip || p.Bits() == p.Addr().BitLen() {
				continue
			}
			if p.Masked().Contains(vip) {
				return l, nil
			}
			subnets = append(subnets, p.Masked().String())
		}
	}
	return nil, fmt.Errorf("no link of this node is in a subnet that holds %s (subnets here: %v); cluster.vip must be an unused address of the control planes' network", vip, subnets)
}

func prefixOf(a netlink.Addr) (netip.Prefix, bool) {
	if a.IPNet == nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := a.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones), true
}

// Remove implements vip.Link: the address comes off whichever link has it.
func (v VIPLink) Remove(vip netip.Addr) error {
	links, err := v.nl().LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	var errs []error
	for _, l := range links {
		addrs, err := v.nl().AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p, ok := prefixOf(a); ok && p.Addr() == vip {
				if err := v.nl().AddrDel(l, &a); err != nil {
					errs = append(errs, fmt.Errorf("remove %s from %s: %w", vip, l.Attrs().Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Announce implements vip.Link: a gratuitous ARP request and reply, both with the VIP as sender and
// target, broadcast on link. Neighbours that have the address in their ARP cache update it to this
// node's hardware address. IPv6 neighbours learn the new holder through neighbour discovery.
func (v VIPLink) Announce(vip netip.Addr, link string) error {
	if !vip.Is4() {
		return nil
	}
	ifi, err := net.InterfaceByName(link)
	if err != nil {
		return err
	}
	c, err := arp.Dial(ifi)
	if err != nil {
		return fmt.Errorf("open an ARP socket on %s: %w", link, err)
	}
	defer c.Close()
	for _, op := range []arp.Operation{arp.OperationRequest, arp.OperationReply} {
		p, err := arp.NewPacket(op, ifi.HardwareAddr, vip, ethernet.Broadcast, vip)
		if err != nil {
			return err
		}
		if err := c.WriteTo(p, ethernet.Broadcast); err != nil {
			return fmt.Errorf("send gratuitous ARP for %s on %s: %w", vip, link, err)
		}
	}
	return nil
}
