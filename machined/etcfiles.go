package main

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sort"
	"sync"

	"github.com/cairn-os/cairn/machined/internal/netcfg"
	"github.com/cairn-os/cairn/machined/internal/sys"
)

// etcFiles keeps /etc/hostname, /etc/hosts and /etc/resolv.conf current with the network and the
// node's name.
type etcFiles struct {
	log   *slog.Logger
	cfgr  *netcfg.Configurator
	mu    sync.Mutex
	name  string
	extra map[string][]netip.Addr
}

// setExtra publishes discovery names (the API endpoint's and the control planes').
func (e *etcFiles) setExtra(names map[string][]netip.Addr) {
	e.mu.Lock()
	e.extra = names
	e.mu.Unlock()
	e.write()
}

func (e *etcFiles) setHostname(name string) {
	e.mu.Lock()
	e.name = name
	e.mu.Unlock()
	if err := sys.SetHostname(name); err != nil {
		e.log.Warn("hostname", "error", err)
	}
	e.write()
}

func (e *etcFiles) write() {
	st := e.cfgr.State()
	var self netip.Addr
	if a := e.addresses(); len(a) > 0 {
		self, _ = netip.AddrFromSlice(a[0].To4())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// In place, not by rename: kubelet bind-mounts these files into pods, and a rename would leave them
	// on the old inode.
	errs := []error{
		os.WriteFile("/etc/hostname", []byte(e.name+"\n"), 0o644),
		os.WriteFile("/etc/hosts", netcfg.Hosts(e.name, self, e.extra), 0o644),
		os.WriteFile("/etc/resolv.conf", netcfg.ResolvConf(st.Nameservers, st.Search), 0o644),
	}
	if err := errors.Join(errs...); err != nil {
		e.log.Warn("write /etc", "error", err)
	}
}

// addresses lists the node's configured addresses: static ones first (on a VM with a NAT NIC and a
// cluster NIC, the NAT address is the same on every node), then the default route's interface.
func (e *etcFiles) addresses() []net.IP {
	st := e.cfgr.State()
	static := st.Static
	names := make([]string, 0, len(st.Addrs))
	for n := range st.Addrs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if static[names[i]] != static[names[j]] {
			return static[names[i]]
		}
		if (names[i] == st.DefaultIface) != (names[j] == st.DefaultIface) {
			return names[i] == st.DefaultIface
		}
		return names[i] < names[j]
	})
	var out []net.IP
	for _, n := range names {
		for _, p := range st.Addrs[n] {
			out = append(out, p.Addr().AsSlice())
		}
	}
	return out
}
