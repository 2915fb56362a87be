package netcfg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"
)

// Configurator applies plans with netlink and keeps DHCP leases.
type Configurator struct {
	Log *slog.Logger
	// OnChange is called after addresses or nameservers change (to rewrite resolv.conf and hosts).
	OnChange func()

	mu           sync.Mutex
	addrs        map[string][]netip.Prefix
	dns          []netip.Addr
	defaultIface string
}

// Links lists the machine's interfaces.
func (c *Configurator) Links() ([]Link, error) {
	ls, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []Link
	for _, l := range ls {
		a := l.Attrs()
		if l.Type() != "device" && a.Name != "lo" {
			continue // bridges, veths, tunnels made later by CNI are not ours to configure
		}
		out = append(out, Link{Name: a.Name, Loopback: a.Flags&net.FlagLoopback != 0})
	}
	return out, nil
}

// Apply brings links up, sets static addresses and routes, and starts DHCP where planned. It waits up to
// wait for the first leases, then leaves DHCP running in the background under ctx.
func (c *Configurator) Apply(ctx context.Context, p Plan, wait time.Duration) error {
	c.mu.Lock()
	if c.addrs == nil {
		c.addrs = map[string][]netip.Prefix{}
	}
	c.dns = append(c.dns, p.Nameservers...)
	c.mu.Unlock()
	if lo, err := netlink.LinkByName("lo"); err == nil {
		if err := netlink.LinkSetUp(lo); err != nil {
			return fmt.Errorf("bring lo up: %w", err)
		}
	}
	var errs []error
	var leases sync.WaitGroup
	for _, itf := range p.Ifaces {
		link, err := netlink.LinkByName(itf.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", itf.Name, err))
			continue
		}
		if itf.MTU > 0 {
			if err := netlink.LinkSetMTU(link, itf.MTU); err != nil {
				errs = append(errs, fmt.Errorf("%s: set MTU %d: %w", itf.Name, itf.MTU, err))
			}
		}
		if err := netlink.LinkSetUp(link); err != nil {
			errs = append(errs, fmt.Errorf("%s: bring up: %w", itf.Name, err))
			continue
		}
		for _, a := range itf.Addrs {
			if err := c.addAddr(link, a); err != nil {
				errs = append(errs, err)
			}
		}
		if itf.Gateway.IsValid() {
			if err := c.defaultRoute(link, itf.Gateway); err != nil {
				errs = append(errs, err)
			}
		}
		if itf.DHCP {
			first := make(chan struct{})
			leases.Add(1)
			go func() { <-first; leases.Done() }()
			go c.dhcp(ctx, itf.Name, first)
		}
	}
	done := make(chan struct{})
	go func() { leases.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		c.Log.Warn("DHCP has not answered yet; it goes on in the background", "waited", wait)
	}
	c.changed()
	return errors.Join(errs...)
}

func (c *Configurator) addAddr(link netlink.Link, a netip.Prefix) error {
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())}}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("%s: add %s: %w", link.Attrs().Name, a, err)
	}
	c.mu.Lock()
	name := link.Attrs().Name
	for _, have := range c.addrs[name] {
		if have == a {
			c.mu.Unlock()
			return nil
		}
	}
	c.addrs[name] = append(c.addrs[name], a)
	c.mu.Unlock()
	c.Log.Info("address", "interface", name, "address", a)
	return nil
}

func (c *Configurator) defaultRoute(link netlink.Link, gw netip.Addr) error {
	_, all, _ := net.ParseCIDR("0.0.0.0/0")
	r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: all, Gw: gw.AsSlice()}
	if err := netlink.RouteReplace(r); err != nil {
		return fmt.Errorf("%s: default route via %s: %w", link.Attrs().Name, gw, err)
	}
	c.mu.Lock()
	c.defaultIface = link.Attrs().Name
	c.mu.Unlock()
	return nil
}

// dhcp keeps a lease on one interface: it asks until it gets one, applies it, and renews at half the
// lease time. first is closed after the first lease (or never).
func (c *Configurator) dhcp(ctx context.Context, iface string, first chan struct{}) {
	once := sync.OnceFunc(func() { close(first) })
	delay := time.Second
	for ctx.Err() == nil {
		renew, err := c.lease(ctx, iface)
		if err != nil {
			c.Log.Warn("DHCP", "interface", iface, "error", err, "retry", delay)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, time.Minute)
			continue
		}
		once()
		delay = time.Second
		select {
		case <-ctx.Done():
			return
		case <-time.After(renew):
		}
	}
}

func (c *Configurator) lease(ctx context.Context, iface string) (time.Duration, error) {
	cl, err := nclient4.New(iface, nclient4.WithTimeout(3*time.Second), nclient4.WithRetry(2))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	l, err := cl.Request(ctx)
	if err != nil {
		return 0, err
	}
	ack := l.ACK
	ip, ok := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if !ok {
		return 0, fmt.Errorf("lease without an address")
	}
	ones, _ := net.IPMask(ack.SubnetMask()).Size()
	if ones == 0 {
		ones = 24
	}
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return 0, err
	}
	if err := c.addAddr(link, netip.PrefixFrom(ip, ones)); err != nil {
		return 0, err
	}
	c.mu.Lock()
	haveDefault := c.defaultIface != ""
	for _, d := range ack.DNS() {
		if a, ok := netip.AddrFromSlice(d.To4()); ok {
			c.dns = appendUnique(c.dns, a)
		}
	}
	c.mu.Unlock()
	if routers := ack.Router(); len(routers) > 0 && (!haveDefault || c.defaultIfaceIs(iface)) {
		if gw, ok := netip.AddrFromSlice(routers[0].To4()); ok {
			if err := c.defaultRoute(link, gw); err != nil {
				return 0, err
			}
		}
	}
	c.changed()
	lt := ack.IPAddressLeaseTime(time.Hour)
	return max(lt/2, 30*time.Second), nil
}

func (c *Configurator) defaultIfaceIs(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.defaultIface == name
}

func (c *Configurator) changed() {
	if c.OnChange != nil {
		c.OnChange()
	}
}

// State is a snapshot of what is configured.
type State struct {
	Addrs        map[string][]netip.Prefix
	Nameservers  []netip.Addr
	DefaultIface string
}

// State reports the configured addresses, nameservers and the default route's interface.
func (c *Configurator) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := State{Addrs: map[string][]netip.Prefix{}, Nameservers: append([]netip.Addr(nil), c.dns...), DefaultIface: c.defaultIface}
	for k, v := range c.addrs {
		s.Addrs[k] = append([]netip.Prefix(nil), v...)
	}
	return s
}

func appendUnique(list []netip.Addr, a netip.Addr) []netip.Addr {
	for _, x := range list {
		if x == a {
			return list
		}
	}
	return append(list, a)
}
