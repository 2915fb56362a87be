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
	"sync"
	"syscall"
	"time"

	"github.com/u-root/u-root/pkg/kmodule"
	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/machined/internal/modules"
	"github.com/cairn-os/cairn/machined/internal/netcfg"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/sys"
	"github.com/cairn-os/cairn/machined/internal/workload"
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
	if err := sys.MountEarly(); err != nil {
		return err
	}
	sys.CtrlAltDelSignals() // ctrl-alt-del becomes SIGINT: a clean reboot
	loader := modules.Loader{Probe: kmodule.Probe, File: loadModuleFile}
	loadModules(log, loader, "network", modules.Network)
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
	modulesLoaded := make(chan struct{})
	plat := platform{
		system: sys.Machine{}, starter: reaper.Starter(), devices: true, addresses: addresses,
		bundle:       workload.Bundle{Bin: "/usr/bin", CNI: "/opt/cni/bin", Images: "/usr/share/cairn/images.tar"},
		bind:         sys.Bind,
		modulesReady: modulesLoaded,
		hostname:     et.setHostname,
		hosts:        et.setExtra,
		// The API answers first; then the storage modules (the node needs its disks to know whether it
		// is configured); the rest (netfilter, bridge, overlay) load in the background until the
		// workload needs them.
		beforeBoot: func() {
			loadModules(log, loader, "storage", modules.Storage)
			dir := filepath.Join("/lib/modules", kernelRelease())
			list, err := os.ReadFile(filepath.Join(dir, modules.ListName))
			if err != nil {
				log.Error("module list", "error", err)
				close(modulesLoaded)
				return
			}
			go func() {
				start := time.Now()
				n, err := loader.LoadFiles(dir, modules.Paths(list, append(modules.Network, modules.Storage...)))
				if err != nil {
					log.Warn("modules", "set", "remaining", "error", err)
				}
				log.Info("modules loaded", "set", "remaining", "count", n, "took", time.Since(start).Round(time.Millisecond))
				close(modulesLoaded)
			}()
		},
		handle: func(n *node.Node) { handleSignals(n, log) },
	}
	return serve(context.Background(), o, p, plat, log)
}

func loadModules(log *slog.Logger, l modules.Loader, what string, names []string) {
	start := time.Now()
	n, err := l.Load(names)
	if err != nil {
		log.Warn("modules", "set", what, "error", err)
	}
	log.Info("modules loaded", "set", what, "count", n, "took", time.Since(start).Round(time.Millisecond))
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

func loadModuleFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return kmodule.FileInit(f, "", 0)
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
