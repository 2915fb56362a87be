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

// Configurator applies plans with netlink and keeps DHCP leases. The boot applies the plan of the kernel's
// command line; a configured node applies its machine config's over it (Init, Join, every start).
type Configurator struct {
	Log *slog.Logger
	// OnChange is called after addresses or nameservers change (to rewrite resolv.conf and hosts).
	OnChange func()
	// NL is the netlink handle to work through; nil means the process's network namespace.
	NL *netlink.Handle
	// LoadModules loads kernel modules by name before a bond or a VLAN is made (there is no modprobe for
	// the kernel to call); nil when the kernel loads them itself.
	LoadModules func(names ...string)

	mu           sync.Mutex
	addrs        map[string][]netip.Prefix
	leased       map[string][]netip.Prefix     // the addresses DHCP gave, by interface
	dhcpStop     map[string]context.CancelFunc // the interfaces DHCP runs on
	static       map[string]bool               // interfaces whose addresses were given
	dns          []netip.Addr                  // from DHCP and ip=
	configDNS    []netip.Addr                  // from the machine config: replace dns when set
	search       []string
	problems     []string
	defaultIface string
}

func (c *Configurator) nl() *netlink.Handle {
	if c.NL != nil {
		return c.NL
	}
	return &netlink.Handle{} // netlink's own package functions use such a handle: the current namespace
}

// Links lists the machine's interfaces.
func (c *Configurator) Links() ([]Link, error) {
	ls, err := c.nl().LinkList()
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
//
// Apply can run again with a new plan (the machine config's): it is idempotent for what is already so,
// stops DHCP where the new plan has none (removing the addresses DHCP gave), and creates the plan's bonds
// and VLANs. What fails is returned and kept for Problems; the rest of the plan still applies.
func (c *Configurator) Apply(ctx context.Context, p Plan, wait time.Duration) error {
	nl := c.nl()
	c.mu.Lock()
	if c.addrs == nil {
		c.addrs, c.leased, c.dhcpStop, c.static = map[string][]netip.Prefix{}, map[string][]netip.Prefix{}, map[string]context.CancelFunc{}, map[string]bool{}
	}
	if p.OwnDNS {
		c.configDNS = append([]netip.Addr(nil), p.Nameservers...)
	} else {
		for _, a := range p.Nameservers {
			c.dns = appendUnique(c.dns, a)
		}
	}
	c.search = append([]string(nil), p.Search...)
	c.problems = append([]string(nil), p.Problems...)
	c.mu.Unlock()
	if lo, err := nl.LinkByName("lo"); err == nil {
		if err := nl.LinkSetUp(lo); err != nil {
			return fmt.Errorf("bring lo up: %w", err)
		}
	}
	var errs []error
	var leases sync.WaitGroup
	for _, itf := range p.Ifaces {
		if itf.Bond != nil || itf.VLAN != nil {
			if err := c.makeLink(itf); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		link, err := nl.LinkByName(itf.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", itf.Name, err))
			continue
		}
		if !itf.DHCP {
			c.stopDHCP(link)
		}
		if itf.MTU > 0 && link.Attrs().MTU != itf.MTU {
			if err := nl.LinkSetMTU(link, itf.MTU); err != nil {
				errs = append(errs, fmt.Errorf("%s: set MTU %d: %w", itf.Name, itf.MTU, err))
			}
		}
		if err := nl.LinkSetUp(link); err != nil {
			errs = append(errs, fmt.Errorf("%s: bring up: %w", itf.Name, err))
			continue
		}
		c.mu.Lock()
		c.static[itf.Name] = itf.Static
		c.mu.Unlock()
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
		for _, r := range itf.Routes {
			if err := c.route(link, r); err != nil {
				errs = append(errs, err)
			}
		}
		if itf.DHCP && c.startDHCP(ctx, itf.Name, &leases) {
			c.Log.Info("DHCP started", "interface", itf.Name)
		}
	}
	done := make(chan struct{})
	go func() { leases.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		c.Log.Warn("DHCP has not answered yet; it goes on in the background", "waited", wait)
	}
	c.mu.Lock()
	for _, err := range errs {
		c.problems = append(c.problems, err.Error())
	}
	c.mu.Unlock()
	c.changed()
	return errors.Join(errs...)
}

// startDHCP starts keeping a lease on iface unless that runs already; leases is done at the first lease.
func (c *Configurator) startDHCP(ctx context.Context, iface string, leases *sync.WaitGroup) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dhcpStop[iface] != nil {
		return false
	}
	ctx, cancel := context.WithCancel(ctx)
	c.dhcpStop[iface] = cancel
	first := make(chan struct{})
	leases.Add(1)
	go func() {
		select {
		case <-first:
		case <-ctx.Done():
		}
		leases.Done()
	}()
	go c.dhcp(ctx, iface, first)
	return true
}

// stopDHCP ends DHCP on link, if it runs there, and removes the addresses it gave.
func (c *Configurator) stopDHCP(link netlink.Link) {
	name := link.Attrs().Name
	c.mu.Lock()
	stop, leased := c.dhcpStop[name], c.leased[name]
	delete(c.dhcpStop, name)
	delete(c.leased, name)
	c.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	for _, a := range leased {
		if err := c.nl().AddrDel(link, netlinkAddr(a)); err != nil {
			c.Log.Warn("remove DHCP address", "interface", name, "address", a, "error", err)
		}
		c.forget(name, a)
	}
	c.Log.Info("DHCP stopped: the machine config configures this interface", "interface", name, "removed", leased)
}

func (c *Configurator) forget(iface string, a netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.addrs[iface][:0]
	for _, have := range c.addrs[iface] {
		if have != a {
			kept = append(kept, have)
		}
	}
	c.addrs[iface] = kept
}

func netlinkAddr(a netip.Prefix) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())}}
}

func (c *Configurator) addAddr(link netlink.Link, a netip.Prefix) error {
	if err := c.nl().AddrReplace(link, netlinkAddr(a)); err != nil {
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
	if err := c.nl().RouteReplace(r); err != nil {
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
	link, err := c.nl().LinkByName(iface)
	if err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, ctx.Err() // stopped while asking: the interface is configured otherwise now
	}
	leasedAddr := netip.PrefixFrom(ip, ones)
	if err := c.addAddr(link, leasedAddr); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.leased[iface] = appendUniquePrefix(c.leased[iface], leasedAddr)
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
	Static       map[string]bool // interfaces whose addresses were given (ip= or the config)
	Nameservers  []netip.Addr
	Search       []string
	DefaultIface string
	// Problems are what the last plan could not do (a missing NIC, a refused address).
	Problems []string
}

// State reports the configured addresses, the resolvers, the default route's interface and what the
// last plan could not do.
func (c *Configurator) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	dns := c.dns
	if len(c.configDNS) > 0 {
		dns = c.configDNS
	}
	s := State{Addrs: map[string][]netip.Prefix{}, Static: map[string]bool{}, Nameservers: append([]netip.Addr(nil), dns...),
		Search: append([]string(nil), c.search...), DefaultIface: c.defaultIface, Problems: append([]string(nil), c.problems...)}
	for k, v := range c.addrs {
		s.Addrs[k] = append([]netip.Prefix(nil), v...)
	}
	for k, v := range c.static {
		s.Static[k] = v
	}
	return s
}

func appendUniquePrefix(list []netip.Prefix, a netip.Prefix) []netip.Prefix {
	for _, x := range list {
		if x == a {
			return list
		}
	}
	return append(list, a)
}

func appendUnique(list []netip.Addr, a netip.Addr) []netip.Addr {
	for _, x := range list {
		if x == a {
			return list
		}
	}
	return append(list, a)
}
