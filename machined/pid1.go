package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/internal/modload"
	"github.com/cairn-os/cairn/machined/internal/cmdline"
	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/install"
	"github.com/cairn-os/cairn/machined/internal/joinsvc"
	"github.com/cairn-os/cairn/machined/internal/modules"
	"github.com/cairn-os/cairn/machined/internal/netcfg"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/slots"
	"github.com/cairn-os/cairn/machined/internal/sys"
	"github.com/cairn-os/cairn/machined/internal/tpm"
)

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
	// Before anything is started: init switched huge pages off for this process, and its children would
	// inherit that.
	hugePagesAtStart(log)
	if err := sys.MountEarly(); err != nil {
		return err
	}
	memoryAccountingAtStart(log)
	sys.CtrlAltDelSignals() // ctrl-alt-del becomes SIGINT: a clean reboot
	// The kernel gives MODULE.PARAM=VALUE only to the modules built into it; machined passes the node's
	// command line's to the modules it loads, and leaves out those its modprobe.blacklist= names. That
	// line is complete once fw_cfg's driver is loaded (QEMU's per-node arguments), and params is replaced
	// then, before any other module loads.
	kernelLine, err := os.ReadFile(cmdline.Kernel)
	if err != nil {
		return fmt.Errorf("read the kernel command line: %w", err)
	}
	params := modload.ParseParams(string(kernelLine))
	mods := newBootModules(log, modules.Loader{File: modload.Load, Params: &params}, filepath.Join("/lib/modules", kernelRelease()), "/sys", "/proc/modules")
	mods.modprobeSysctl = "/proc/sys/kernel/modprobe"
	mods.firmwareConfig()
	line := cmdline.WithFwCfg(kernelLine, os.ReadFile)
	params = modload.ParseParams(line)
	// The disk controllers' drivers load beside the rest: they wait for their links, DHCP for its server.
	mods.startDisks()
	mods.buses()
	mods.network()
	p, err := settings(o, line)
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
	et := &etcFiles{log: log, cfgr: cfgr}
	cfgr.OnChange = et.write
	if err := cfgr.Apply(context.Background(), plan, 5*time.Second); err != nil {
		log.Warn("network", "error", err)
	}
	addresses := func() []net.IP { return et.addresses() }
	// A bond or a VLAN needs its driver, and there is no modprobe for the kernel to ask.
	cfgr.LoadModules = func(names ...string) { mods.load("links", func() []string { return names }) }
	scanner := inventory.Scanner{SysRoot: "/sys", DevRoot: "/dev"}
	// The payload's medium and a seed volume are found by their signatures and labels, so their searches
	// skip the full scan's reading of each blank disk's first and last 2 MiB, which only deciding what may
	// be formatted needs (inventory.Scanner): the installer and the slots keep the full scan.
	labels := scanner
	labels.SignaturesOnly = true
	efi := &efiVars{load: func(names ...string) { mods.load("efivars", func() []string { return names }) }, log: log}
	pay := newPayloadSource(labels, func(names ...string) { mods.load("payload medium", func() []string { return names }) }, reaper.Starter(), log)
	// A slot's boot entry mounts that slot's payload, even when the other slot holds the same image.
	pay.finder.Slot = efi.bootedSlot
	wd := &machineWatchdog{}
	plat := platform{
		netState: cfgr,
		clock:    &clock{log: log},
		measured: &measuredLock{log: log},
		crypt:    stateCrypt(mods, reaper.Starter()),
		network: func(_ context.Context, c *config.MachineConfig) error {
			return applyNetworkConfig(cfgr, p.IP, ipOff, &c.Machine.Network, log)
		},
		platformNetwork: func(_ context.Context, n *config.Network) error {
			return applyNetworkConfig(cfgr, p.IP, ipOff, n, log)
		},
		system: sys.Machine{}, starter: reaper.Starter(), devices: true, addresses: addresses,
		payload: pay.Payload(),
		slots: &slots.Manager{Disks: scanner.Scan, Mounter: sys.Mounter{}, ESPDir: "/run/cairn/esp", EFIVars: efiVarsDir, MountEFIVars: efi.ensure, Log: log,
			Mounts:      func() ([]byte, error) { return os.ReadFile("/proc/self/mounts") },
			LoadModules: func(names ...string) { mods.load("ESP", func() []string { return names }) }},
		install: &install.Installer{Disks: scanner.Scan, Runner: apply.ExecRunner{Starter: reaper.Starter()}, Mounter: sys.Mounter{}, Work: "/run/cairn/install", Log: log,
			Partitions:  apply.KernelPartitions{Disks: &scanner, Reread: sys.RereadPartitions},
			Mounts:      func() ([]byte, error) { return os.ReadFile("/proc/self/mounts") },
			LoadModules: func(names ...string) { mods.load("ESP", func() []string { return names }) }},
		vipLink:      netcfg.VIPLink{},
		watchdog:     wd.stop,
		bind:         sys.Bind,
		modulesReady: mods.all,
		disksReady:   mods.waitDisks,
		filesystems:  mods.filesystems,
		hostname:     et.setHostname,
		hosts:        et.setExtra,
		userData:     userDataSearch(labels, mods, p.All, log),
		attest: func() (joinsvc.Attester, error) {
			// The TPM's driver is one of the modules loaded behind the API: a join that starts at boot
			// must not take a TPM that is not there yet for none.
			select {
			case <-mods.all:
			case <-time.After(time.Minute):
			}
			k, err := tpm.OpenAttestationKey(tpm.DevicePath)
			if err != nil {
				return nil, err
			}
			return k, nil
		},
		// handle runs once the node has read its lock: the API answers, and the rest of the modules can
		// load behind it.
		handle: func(n *node.Node, log *slog.Logger, bus *events.Bus) {
			mods.background()
			pay.publishTo(bus, func() string { return n.Status().Sequence })
			pay.early(mods.disks, log, n.Status().LockedBy != "")
			go pay.hurryOnSequence(bus)
			go wd.run(mods.all, mods.softWatchdog, n, log, bus)
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

// applyNetworkConfig lays the machine config's network over the boot's. Its DHCP lives as long as the
// process, not the sequence that applied it. What this machine cannot do is logged (the console) and kept
// for status; it does not stop the sequence: the node stays reachable on what works.
func applyNetworkConfig(cfgr *netcfg.Configurator, ips []cmdline.IPConfig, ipOff bool, c *config.Network, log *slog.Logger) error {
	links, err := cfgr.Links()
	if err != nil {
		return err
	}
	plan, err := netcfg.Make(links, ips, ipOff, c)
	if err != nil {
		return err
	}
	if err := cfgr.Apply(context.Background(), plan, 5*time.Second); err != nil {
		log.Warn("network config: part of it could not be applied", "error", err)
	}
	for _, p := range plan.Problems {
		log.Warn("network config: not applied", "problem", p)
	}
	return nil
}
