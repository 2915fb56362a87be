package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-os/cairn/machined/internal/cmdline"
	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/joinsvc"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/sequence"
	"github.com/cairn-os/cairn/machined/internal/server"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
	"github.com/cairn-os/cairn/machined/internal/sys"
	"github.com/cairn-os/cairn/machined/internal/volumes"
)

// options are machined's flags. On a real node every setting comes from the kernel command line; the
// flags exist for sandbox mode, where machined runs as an ordinary process under --root.
type options struct {
	root      string
	listen    string
	token     string
	join      string
	joinToken string
	joinCA    string
	hostname  string
	cmdline   string
	hostDisks bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("machined", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.root, "root", "", "sandbox mode: keep every path of the node under this directory and skip PID-1 duties")
	fs.StringVar(&o.listen, "listen", ":50000", "address of the machine API")
	fs.StringVar(&o.token, "token", "", "bootstrap token for the maintenance API (default: cairn.token= from the kernel command line, else random and printed)")
	fs.StringVar(&o.join, "join", "", "sandbox mode: join the cluster whose join service is at HOST:PORT (cairn.join=)")
	fs.StringVar(&o.joinToken, "join-token", "", "sandbox mode: the join token (cairn.jointoken=)")
	fs.StringVar(&o.joinCA, "join-ca", "", "SHA-256 of the cluster's machine CA certificate to pin when joining (cairn.joinca=)")
	fs.StringVar(&o.hostname, "hostname", "", "the node's hostname before a config sets one (cairn.hostname=)")
	fs.StringVar(&o.cmdline, "cmdline", "", "sandbox mode: a kernel command line to read settings from, instead of none")
	fs.BoolVar(&o.hostDisks, "host-disks", false, "sandbox mode: put volumes on the host's block devices that the config selects (run in a private mount namespace), instead of directories under --root")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	pid1 := os.Getpid() == 1
	if !pid1 && o.root == "" {
		return errors.New("not PID 1: give --root DIR to run in sandbox mode")
	}
	sandbox := o.root != ""
	if sandbox {
		if o.root, err = filepath.Abs(o.root); err != nil {
			return err
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := settings(o, sandbox)
	if err != nil {
		return err
	}
	return serve(ctx, o, p, sandbox, log)
}

// settings merges the kernel command line (a real node) and the flags (sandbox mode); flags win.
func settings(o options, sandbox bool) (cmdline.Params, error) {
	line := o.cmdline
	if !sandbox {
		b, err := os.ReadFile("/proc/cmdline")
		if err != nil {
			return cmdline.Params{}, fmt.Errorf("read the kernel command line: %w", err)
		}
		line = string(b)
	}
	p, err := cmdline.Parse(line)
	if err != nil {
		return p, fmt.Errorf("kernel command line: %w", err)
	}
	for dst, v := range map[*string]string{&p.Token: o.token, &p.JoinAddr: o.join, &p.JoinToken: o.joinToken, &p.Hostname: o.hostname} {
		if v != "" {
			*dst = v
		}
	}
	if o.joinCA != "" {
		p.All["cairn.joinca"] = o.joinCA
	}
	return p, nil
}

func serve(ctx context.Context, o options, p cmdline.Params, sandbox bool, log *slog.Logger) error {
	bus := events.NewBus(nil, nil)
	token, generated := p.Token, false
	if token == "" {
		token, generated = randomHex(16), true
	}
	addrs := func() []net.IP { return listenIPs(o.listen) }
	creds, err := server.NewCredentials(p.Hostname, addrs(), time.Now())
	if err != nil {
		return err
	}
	services := supervisor.New(bus, log)
	started := time.Now()
	services.Register("machined", func() supervisor.Info {
		return supervisor.Info{Name: "machined", State: supervisor.StateRunning, Health: supervisor.Healthy, Since: started, PID: os.Getpid()}
	})
	layout := paths.Paths{Root: o.root}
	vols := &volumes.Manager{Paths: layout, Devices: !sandbox || o.hostDisks, Mounter: sys.Mounter{}, Runner: apply.ExecRunner{}, Log: log,
		Scanner: inventory.Scanner{SysRoot: "/sys", DevRoot: "/dev"}}
	n := node.New(node.Options{
		Paths: layout, Bus: bus, Log: log, Sys: sandboxSystem{}, API: creds, Sandbox: sandbox,
		Hostname: p.Hostname, Addresses: addrs, JoinAddr: p.JoinAddr, JoinToken: p.JoinToken,
		Tickets: &joinsvc.Client{CAHash: p.All["cairn.joinca"]},
		Hooks:   node.Hooks{Preflight: vols.Preflight, Storage: vols.Hook, Stop: func(fsm.Sequence) []sequence.Task { return vols.StopTasks() }},
	})
	srv := server.New(&server.Server{Node: n, Bus: bus, Supervise: services, Storage: vols, Usage: statfs,
		Build: server.Build{Version: version, Commit: commit}},
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

	log.Info("machine API listening", "address", lis.Addr().String(), "fingerprint", creds.Fingerprint(), "sandbox", sandbox)
	if generated {
		log.Info("no bootstrap token was given: generated one", "token", token)
	}
	if err := n.Start(ctx); err != nil {
		log.Error("boot", "error", err)
	}
	select {
	case <-ctx.Done():
		log.Info("signal received: stopping")
	case <-n.Finished():
		log.Info("shut down")
	case err := <-serveErr:
		return fmt.Errorf("machine API: %w", err)
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	return nil
}

// sandboxSystem has no machine to reboot or power off: the node restarts in-process, or the process ends.
type sandboxSystem struct{}

func (sandboxSystem) Reboot() error   { return nil }
func (sandboxSystem) PowerOff() error { return nil }

func statfs(path string) (uint64, uint64, error) {
	u, err := sys.Statfs(path)
	return u.Size, u.Used, err
}

func listenIPs(listen string) []net.IP {
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err == nil && ip != nil && !ip.IsUnspecified() {
		return []net.IP{ip}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
