package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/machined/internal/modules"
	"github.com/cairn-os/cairn/machined/internal/netcfg"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/sys"
)

// fwCfgCmdline is where QEMU's -fw_cfg passes per-node kernel arguments to a node booted from the ISO or
// the raw disk, whose own command line is baked into the image.
const fwCfgCmdline = "/sys/firmware/qemu_fw_cfg/by_name/opt/dev.cairn/cmdline/raw"

// runPID1 is machined as the node's init: it never returns while the machine runs (PID 1 exiting panics
// the kernel); errors before the API is up are printed and the machine reboots, like init does.
func runPID1(o options, log *slog.Logger) error {
	reaper := sys.NewReaper(func(pid int, st unix.WaitStatus) { log.Debug("reaped orphan", "pid", pid) })
	if err := bringUp(o, log, reaper); err != nil {
		fmt.Fprintf(os.Stderr, "\nmachined: %v\nmachined: rebooting in 10s\n", err)
		time.Sleep(10 * time.Second)
		sys.Machine{}.Reboot()
	}
	select {} // PowerOff and Reboot do not return; neither may PID 1
}

func bringUp(o options, log *slog.Logger, reaper *sys.Reaper) error {
	// When machined got going, counted from the kernel's start: what the console timeline of a boot
	// starts from (the Go runtime and package initialisation come before this line).
	log.Info("machined started as PID 1", "version", version, "uptime", uptime())
	if err := sys.MountEarly(); err != nil {
		return err
	}
	sys.CtrlAltDelSignals() // ctrl-alt-del becomes SIGINT: a clean reboot
	mods := newBootModules(log, modules.Loader{File: loadModuleFile}, filepath.Join("/lib/modules", kernelRelease()), "/sys", "/proc/modules")
	// The disk controllers' drivers load beside the rest: they wait for their links, DHCP for its server.
	mods.startDisks()
	mods.buses()
	mods.network()
	line, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return fmt.Errorf("read the kernel command line: %w", err)
	}
	if extra, err := os.ReadFile(fwCfgCmdline); err == nil {
		line = append(append(line, ' '), extra...)
	}
	p, err := settings(o, string(line))
	if err != nil {
		return err
	}
	cfgr := &netcfg.Configurator{Log: log}
	links, err := cfgr.Links()
	if err != nil {
		return err
	}
	_, ipOff := p.All["ip"]
	ipOff = ipOff && (p.All["ip"] == "off" || p.All["ip"] == "none")
	plan, err := netcfg.Make(links, p.IP, ipOff, nil)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if p.Hostname == "" {
		p.Hostname = plan.Hostname
	}
	et := &etcFiles{log: log, cfgr: cfgr, plan: plan}
	cfgr.OnChange = et.write
	if err := cfgr.Apply(context.Background(), plan, 5*time.Second); err != nil {
		log.Warn("network", "error", err)
	}
	addresses := func() []net.IP { return et.addresses() }
	plat := platform{
		system: sys.Machine{}, starter: reaper.Starter(), devices: true, addresses: addresses,
		payload:      nodePayload(sys.Mounter{}),
		bind:         sys.Bind,
		modulesReady: mods.all,
		disksReady:   mods.waitDisks,
		filesystems:  mods.filesystems,
		hostname:     et.setHostname,
		hosts:        et.setExtra,
		// handle runs once the node has read its lock: the API answers, and the rest of the modules can
		// load behind it.
		handle: func(n *node.Node) {
			mods.background()
			handleSignals(n, log)
		},
	}
	return serve(context.Background(), o, p, plat, log)
}

// handleSignals turns PID 1's signals into node operations: SIGINT (ctrl-alt-del) reboots, SIGTERM and
// SIGPWR (a power button, a UPS) shut down cleanly.
func handleSignals(n *node.Node, log *slog.Logger) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGPWR)
	for s := range ch {
		log.Info("signal", "signal", s.String())
		var err error
		if s == syscall.SIGINT {
			err = n.Reboot(context.Background())
		} else {
			err = n.Shutdown(context.Background())
		}
		if err != nil {
			log.Error("signal", "signal", s.String(), "error", err)
		}
	}
}

// uptime is the time since the kernel started (/proc/uptime), "" if unknown.
func uptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0] + "s"
	}
	return ""
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// etcFiles keeps /etc/hostname, /etc/hosts and /etc/resolv.conf current with the network and the
// node's name.
type etcFiles struct {
	log   *slog.Logger
	cfgr  *netcfg.Configurator
	plan  netcfg.Plan
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
		os.WriteFile("/etc/resolv.conf", netcfg.ResolvConf(st.Nameservers, nil), 0o644),
	}
	if err := errors.Join(errs...); err != nil {
		e.log.Warn("write /etc", "error", err)
	}
}

// addresses lists the node's configured addresses: static ones first (on a VM with a NAT NIC and a
// cluster NIC, the NAT address is the same on every node), then the default route's interface.
func (e *etcFiles) addresses() []net.IP {
	st := e.cfgr.State()
	static := map[string]bool{}
	for _, itf := range e.plan.Ifaces {
		static[itf.Name] = itf.Static
	}
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
