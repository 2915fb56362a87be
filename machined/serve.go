package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/cmdline"
	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
	"github.com/cairn-os/cairn/machined/internal/diskspace"
	"github.com/cairn-os/cairn/machined/internal/etcdops"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/images"
	"github.com/cairn-os/cairn/machined/internal/install"
	"github.com/cairn-os/cairn/machined/internal/joinsvc"
	"github.com/cairn-os/cairn/machined/internal/kmsg"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/logs"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/proc"
	"github.com/cairn-os/cairn/machined/internal/profile"
	"github.com/cairn-os/cairn/machined/internal/sequence"
	"github.com/cairn-os/cairn/machined/internal/server"
	"github.com/cairn-os/cairn/machined/internal/slots"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
	"github.com/cairn-os/cairn/machined/internal/sys"
	"github.com/cairn-os/cairn/machined/internal/timesync"
	"github.com/cairn-os/cairn/machined/internal/vip"
	"github.com/cairn-os/cairn/machined/internal/volumes"
	"github.com/cairn-os/cairn/machined/internal/workload"
	"google.golang.org/grpc"
)

// platform is what differs between a real node (PID 1) and sandbox mode.
type platform struct {
	sandbox bool
	root    string
	system  node.System
	starter proc.Starter
	// devices: volumes on block devices (the boot media are never touched: see volumes.BootMedia).
	devices   bool
	addresses func() []net.IP
	// hostname is called whenever the node's name changes.
	hostname func(string)
	// hosts publishes discovery names into /etc/hosts (nil in sandbox mode: the host's is not ours).
	hosts func(map[string][]netip.Addr)
	// userData looks for the platform's user data (nil in sandbox mode: the host's disks and metadata
	// service are not the node's).
	userData func(context.Context) (node.PlatformAnswer, error)
	// network applies the machine config's network, and netState reports the network in Status (both nil:
	// the node does not own the network, sandbox).
	network  func(ctx context.Context, c *config.MachineConfig) error
	netState server.Network
	// platformNetwork applies a platform's network config in maintenance mode (nil: sandbox).
	platformNetwork func(ctx context.Context, n *config.Network) error
	// clock keeps the clock from the config's time servers, and reports it (nil: sandbox, the host's).
	clock *clock
	// crypt makes and opens an encrypted STATE; nil in sandbox mode, where the TPM is the host's.
	crypt apply.Crypter
	// measured measures the node lock into the TPM; nil in sandbox mode, where the TPM is the host's.
	measured *measuredLock
	// attest opens the TPM's attestation key for a join (nil in sandbox mode: the TPM is the host's).
	attest func() (joinsvc.Attester, error)
	// beforeBoot runs after the API listens and before the node's boot sequence (sandbox mode copies the
	// host's resolver files there).
	beforeBoot func()
	// handle runs once the node has read its lock and turns signals into node operations (PID 1; it
	// also loads the rest of the kernel modules and starts looking for the payload then); log is machined's
	// log, ring included, and bus the node's events. nil: signals end the process (sandbox).
	handle func(n *node.Node, log *slog.Logger, bus *events.Bus)
	// exit runs when the process ends (sandbox: restore what kubelet changed on the host).
	exit func()
	// watchdog stops the petting of the watchdog (the WatchdogStop RPC; nil in sandbox mode).
	watchdog func() (time.Duration, bool)
	// vipLink puts cluster.vip on the node (nil: sandbox mode takes no part in its election).
	vipLink vip.Link
	// payload is where containerd, runc, the CNI plugins and the images are.
	payload workload.Payload
	// modulesReady is closed once the kernel modules are loaded (nil: nothing to wait for).
	modulesReady <-chan struct{}
	// disksReady and filesystems hold the volumes' disk scans and mounts until the kernel modules they
	// need are loaded (nil in sandbox mode: the host's kernel has them). See bootModules.
	disksReady, filesystems func(context.Context) error
	// slots are the boot slots of the disk the node booted from (nil in sandbox mode: upgrades replace a
	// real node's image).
	slots *slots.Manager
	// install writes Cairn onto a disk from the live medium (nil in sandbox mode).
	install *install.Installer
	// bind bind-mounts directories from STATE into /etc (nil in sandbox mode: /etc is a directory there).
	bind func(src, dst string) error
}

func serve(ctx context.Context, o options, p cmdline.Params, plat platform, log *slog.Logger) error {
	if plat.exit != nil {
		defer plat.exit()
	}
	bus := events.NewBus(nil, nil)
	if plat.measured != nil {
		plat.measured.bus = bus
	}
	token, generated := p.Token, false
	if token == "" {
		token, generated = randomHex(16), true
	}
	creds, err := server.NewCredentials(p.Hostname, plat.addresses(), time.Now())
	if err != nil {
		return err
	}
	services := supervisor.New(bus, log)
	// machined's own log also goes to its ring, for `cairnctl logs machined`.
	log = slog.New(logs.NewHandler(log.Handler(), services.Logs("machined")))
	services.Log = log
	var onRelease func(running bool)
	if !plat.sandbox {
		onRelease = pid1Release(log, p.All) // kernel-wide settings among them: a sandbox node's kernel is its host's
	}
	releaseAfterSequences(bus, log, onRelease)
	started := time.Now()
	services.Register("machined", func() supervisor.Info {
		return supervisor.Info{Name: "machined", State: supervisor.StateRunning, Health: supervisor.Healthy, Since: started, PID: os.Getpid()}
	})
	layout := paths.Paths{Root: plat.root}
	kl := kube.NewLayout(layout)
	logFiles := &logs.Files{Dir: layout.Logs()}
	vols := &volumes.Manager{Paths: layout, Devices: plat.devices, Mounter: sys.Mounter{}, Runner: apply.ExecRunner{Starter: plat.starter},
		Log: log, Scanner: inventory.Scanner{SysRoot: "/sys", DevRoot: "/dev"}, Reread: sys.RereadPartitions,
		DisksReady: plat.disksReady, Filesystems: plat.filesystems, Crypt: plat.crypt, HasTPM: hasTPM}
	var n *node.Node
	joinSvc := &joinsvc.Service{Bus: bus, Verifier: &joinsvc.Verifier{}}
	wl := &workload.Workload{Paths: layout, Sandbox: plat.sandbox, Payload: plat.payload, Services: services, Starter: plat.starter,
		Log: log, BindShared: sys.BindShared, Ready: plat.modulesReady, Now: time.Now, Hosts: plat.hosts,
		Identity:   func() (string, []netip.Addr) { return n.Status().Hostname, netipAddrs(plat.addresses()) },
		Ticket:     func() (*machine.JoinTicket, error) { return n.Ticket() },
		StateDir:   func() string { return n.StateDir() },
		Bind:       plat.bind,
		EtcdVolume: vols.CheckEtcdVolume,
		VIPLink:    plat.vipLink,
		VIPEvent: func(outcome, message string) {
			bus.Publish(events.Event{Kind: events.KindVIP, Outcome: outcome, Message: message})
		},
		NamesEvent: func(message string) {
			bus.Publish(events.Event{Kind: events.KindNames, Outcome: "updated", Message: message})
		},
		StartJoinService: func() error {
			cert, err := n.IdentityChain()
			if err != nil {
				return err
			}
			return joinSvc.Start(o.joinListen, cert)
		}}
	// Join tokens live in the cluster, so every control plane honours every token; a sandbox node without
	// a payload runs no Kubernetes and keeps its own on STATE.
	var tokenStore joinsvc.Store = joinsvc.ClusterStore{API: func() (joinsvc.SecretAPI, error) {
		c, err := wl.KubeAPI()
		if err != nil {
			return nil, err
		}
		return c, nil
	}}
	if plat.sandbox && plat.payload.Dir == "" {
		tokenStore = joinsvc.FileStore(func() string { return filepath.Join(n.StateDir(), joinsvc.TokensFile) })
	}
	tokens := joinsvc.NewTokens(tokenStore, time.Now)
	joinSvc.Issuer = &joinsvc.Issuer{Tokens: tokens, Config: func() *config.MachineConfig { return n.Machine() }, Members: wl.Members, Etcd: wl, Now: time.Now,
		NodeKnown: func(ctx context.Context, name string) error {
			ok, err := wl.NodeExists(ctx, name)
			if err == nil && !ok {
				err = &joinsvc.RenewDenied{Reason: fmt.Sprintf("node %s is not in the cluster (its Node object is gone): reset it and join it again", name)}
			}
			return err
		},
		Rejoin: wl.ClearLeft}
	// A real machine's reboot or power-off lets the API answer first (see drainFirst); a sandbox node keeps
	// its API across an in-process reboot.
	var srv *grpc.Server
	system := plat.system
	if !plat.sandbox {
		system = drainFirst{System: plat.system, drain: func(wait time.Duration) { stopGracefully(srv, wait) }}
	}
	n = node.New(node.Options{
		Paths: layout, Bus: bus, Log: log, Sys: system, API: creds, Sandbox: plat.sandbox,
		Hostname: p.Hostname, OnHostname: plat.hostname, Addresses: plat.addresses,
		JoinAddr: p.JoinAddr, JoinToken: p.JoinToken, JoinCA: p.All["cairn.joinca"], Tickets: &joinsvc.Client{CAHash: p.All["cairn.joinca"], Attest: plat.attest}, Renewer: &joinsvc.Client{},
		Platform: plat.userData, PlatformNetwork: plat.platformNetwork, TicketsFor: func(caHash string) node.TicketSource { return &joinsvc.Client{CAHash: caHash, Attest: plat.attest} },
		Hooks: node.Hooks{Preflight: vols.Preflight, Network: plat.network, Time: plat.timeHook(), Workload: workloadHook(plat, wl, log), Drain: wl.DrainTasks, Leave: wl.LeaveTasks, Reconfigure: wl.Reconfigure, Measure: plat.measureHook(), Running: wl.WhileRunning, Wipe: vols.WipeTasks,
			// Once EPHEMERAL is mounted, service logs also go to rotating files under /var/log/cairn.
			Storage: func(c *config.MachineConfig, seq fsm.Sequence, stateAt func(dir string)) []sequence.Task {
				return append(vols.Hook(c, seq, stateAt), sequence.Task{Name: "log-files", Run: func(context.Context) error {
					if c == nil {
						return nil
					}
					// A full or read-only EPHEMERAL must not stop the node: the logs stay in the rings
					// (`cairnctl logs`), and the volume monitor reports the full volume.
					if err := logFiles.Attach(services, "machined", "containerd", "kubelet"); err != nil {
						log.Warn("log files: the services' logs are kept in memory only", "error", err)
					}
					return nil
				}})
			},
			Stop: func(fsm.Sequence) []sequence.Task {
				closeLogs := sequence.Task{Name: "close-log-files", Run: func(context.Context) error { return logFiles.Detach() }}
				return append(append(wl.StopTasks(), closeLogs), vols.StopTasks()...)
			}},
	})
	space := volumeSpace(layout, bus)
	etcdOps := &etcdops.Client{CACert: kl.PKIFile(kube.EtcdCACert), Cert: kl.PKIFile(kube.EtcdHealthcheckCert),
		Key: kl.PKIFile(kube.EtcdHealthcheckKey)}
	var upg server.Upgrader
	if plat.slots != nil {
		upg = &upgrader{slots: plat.slots, node: n, etcd: etcdOps, version: version, bus: bus}
	}
	var inst server.Installer
	if plat.install != nil {
		inst = &installer{inst: plat.install, node: n, payload: plat.payload, version: version, bus: bus}
	}
	srv = server.New(&server.Server{Node: n, Bus: bus, Supervise: services, Storage: vols, Kube: wl, Certs: wl, Usage: statfs, JoinTokens: tokens,
		Warnings:  space.Warnings,
		JoinPort:  listenPort(o.joinListen, client.JoinPort),
		LogSource: &logs.Source{Rings: services, PodLogs: layout.Join("var", "log", "pods")},
		KernelLog: &kmsg.Reader{Path: "/dev/kmsg", ProcRoot: "/proc"},
		EtcdOps:   etcdOps,
		Upgrader:  upg,
		Installer: inst,
		Images:    &images.Service{Paths: layout, Client: wl.ContainerdClient, Bundled: wl.BundledImages, Usage: statfs, Unpacking: wl.Unpacking},
		Build:     server.Build{Version: version, Commit: commit}, Memory: proc.ResidentMemory, Profiles: profile.Runtime{}, Watchdog: plat.watchdog,
		Network: plat.netState, Clock: plat.clockState(), TPM: plat.measured.State, PCRs: plat.measured.PCRs,
		Attest: plat.attest},
		&server.Auth{Creds: creds, Token: token, Bus: bus})
	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("machine API: %w", err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	services.Register("apid", func() supervisor.Info {
		return supervisor.Info{Name: "apid", State: supervisor.StateRunning, Health: supervisor.Healthy, Since: started}
	})
	log.Info("machine API listening", "address", lis.Addr().String(), "fingerprint", creds.Fingerprint(), "sandbox", plat.sandbox)
	if generated {
		log.Info("no bootstrap token was given: generated one", "token", token)
	}
	if plat.beforeBoot != nil {
		plat.beforeBoot()
	}
	// The node's sequences live until the process ends, not until a signal: a signal starts a shutdown
	// sequence, which must be able to run.
	life, endLife := context.WithCancel(context.Background())
	defer endLife()
	stuck := ""
	if err := n.Start(life); err != nil {
		log.Error("boot", "error", err)
		if !creds.Decided() {
			stuck = err.Error()
			creds.Stuck(stuck)
		}
	}
	if plat.devices {
		go space.Run(life)
	}
	if plat.slots != nil {
		go newTrial(plat.slots, n, wl, bus, log).Run(life)
	}
	notifySystemd(life, log, func() { n.Status() })
	if !plat.sandbox {
		st := n.Status()
		banner(os.Stdout, st, listenPort(o.listen, client.MachinePort), creds.Fingerprint(), token, generated, stuck)
	}
	if plat.handle != nil {
		go plat.handle(n, log, bus)
	}
	select {
	case <-ctx.Done():
		// A sandbox node stopped by a signal shuts down like one told to over the API: the kubelet, the
		// pods and containerd stop with it instead of lingering on the host.
		log.Info("signal received: shutting down")
		if err := n.Shutdown(context.Background()); err == nil {
			select {
			case <-n.Finished():
			case <-time.After(2 * time.Minute):
				log.Warn("shutdown did not finish in 2 minutes")
			}
		}
	case <-n.Finished():
		log.Info("shut down")
	case err := <-serveErr:
		if err != nil {
			return fmt.Errorf("machine API: %w", err)
		}
		// A reboot or power-off stopped the API (drainFirst); the machine goes down now.
		<-n.Finished()
	}
	stopGracefully(srv, 5*time.Second)
	return nil
}

// stopGracefully lets the API's calls end, and cuts those still open after wait.
func stopGracefully(srv *grpc.Server, wait time.Duration) {
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(wait):
		srv.Stop()
	}
}

// timeHook is the node's Time hook: nil in sandbox mode, where the clock is the host's.
func (p platform) timeHook() func(context.Context, *config.MachineConfig) error {
	if p.clock == nil {
		return nil
	}
	return p.clock.start
}

// measureHook is the node's Measure hook: nil in sandbox mode.
func (p platform) measureHook() func(context.Context, *config.MachineConfig, string) error {
	if p.measured == nil {
		return nil
	}
	return p.measured.measure
}

// clockState reports the clock in Status: nil in sandbox mode.
func (p platform) clockState() func() (timesync.State, bool) {
	if p.clock == nil {
		return nil
	}
	return p.clock.State
}

// sandboxSystem has no machine to reboot or power off: the node restarts in-process, or the process ends.
type sandboxSystem struct{}

func (sandboxSystem) Reboot() error   { return nil }
func (sandboxSystem) PowerOff() error { return nil }

// kubeletSysctls are host settings the kubelet changes at start; a sandbox node gives them back when it
// ends, since on a developer's machine or a CI host they are not the kubelet's to keep.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

func sandboxPlatform(o options, log *slog.Logger) platform {
	saved := map[string][]byte{}
	for _, k := range kubeletSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			saved[k] = v
		}
	}
	return platform{
		// The kubelet hands pods the node's resolver and hosts files; a sandbox node's are the host's.
		beforeBoot: func() {
			etc := filepath.Join(o.root, "etc")
			if err := os.MkdirAll(etc, 0o755); err != nil {
				log.Warn("sandbox /etc", "error", err)
				return
			}
			for _, f := range []string{"resolv.conf", "hosts"} {
				if b, err := os.ReadFile(filepath.Join("/etc", f)); err == nil {
					if err := os.WriteFile(filepath.Join(etc, f), b, 0o644); err != nil {
						log.Warn("sandbox /etc", "file", f, "error", err)
					}
				}
			}
		},
		exit: func() {
			for k, v := range saved {
				if err := os.WriteFile(filepath.Join("/proc/sys", k), v, 0o644); err != nil {
					log.Warn("restore host sysctl", "key", k, "error", err)
				}
			}
		},
		sandbox: true, root: o.root, system: sandboxSystem{}, starter: proc.Exec{}, devices: o.hostDisks,
		addresses: func() []net.IP { return listenIPs(o.listen) },
		payload:   workload.Payload{Dir: o.payload},
	}
}

// workloadHook is the Kubernetes part of Init, Join and the start path. A sandbox node given no --payload
// has no containerd or Kubernetes to run: its sequences stop at the machine's own tasks (the lock, the
// PKI, mutual TLS), which is what the fast sandbox tests and `make run-sandbox` exercise.
func workloadHook(plat platform, wl *workload.Workload, log *slog.Logger) func(*config.MachineConfig, fsm.Sequence) []sequence.Task {
	if plat.sandbox && plat.payload.Dir == "" {
		log.Info("sandbox without --payload: Init and Join will not start containerd or Kubernetes")
		return func(*config.MachineConfig, fsm.Sequence) []sequence.Task { return nil }
	}
	return wl.Hook
}

func netipAddrs(ips []net.IP) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// volumeSpace watches how full the node's volumes are (on a node: in sandbox mode they are directories
// of the host's filesystem, which the monitor skips as not mounted).
func volumeSpace(layout paths.Paths, bus *events.Bus) *diskspace.Monitor {
	m := &diskspace.Monitor{Usage: mountedStatfs, Event: func(outcome, msg string) {
		bus.Publish(events.Event{Kind: events.KindDisk, Outcome: outcome, Message: msg})
	}}
	for _, v := range []plan.Volume{plan.State, plan.Ephemeral, plan.Etcd} {
		m.Volumes = append(m.Volumes, diskspace.Volume{Name: string(v), Path: layout.Join(v.DefaultTarget())})
	}
	return m
}

// mountedStatfs is statfs of a mounted volume only: before its volume is mounted a path measures the
// filesystem below (the read-only root, always "full").
func mountedStatfs(path string) (uint64, uint64, error) {
	ok, err := sys.IsMountPoint(path)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("%s is not mounted", path)
	}
	return statfs(path)
}

func statfs(path string) (uint64, uint64, error) {
	u, err := sys.Statfs(path)
	return u.Size, u.Used, err
}

// listenPort is the port of a listen address (":50001", "10.0.0.2:50001"); def when it names none.
func listenPort(addr string, def int) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return def
	}
	n, err := strconv.Atoi(p)
	if err != nil || n == 0 {
		return def
	}
	return n
}
