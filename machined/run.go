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

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/machined/internal/cmdline"
)

// options are machined's flags. On a real node every setting comes from the kernel command line; the
// flags exist for sandbox mode, where machined runs as an ordinary process under --root.
type options struct {
	root       string
	listen     string
	token      string
	join       string
	joinToken  string
	joinCA     string
	hostname   string
	cmdline    string
	hostDisks  bool
	payload    string
	joinListen string
}

// parseFlags reads machined's flags. As PID 1 its arguments are the kernel command line's words the kernel
// did not know (init passes them on): they are not flags, and a stray word must not stop the node, so
// they are ignored there (machined reads /proc/cmdline for its own settings).
func parseFlags(args []string, stderr io.Writer, pid1 bool) (options, error) {
	var o options
	fs := flag.NewFlagSet("machined", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.root, "root", "", "sandbox mode: keep every path of the node under this directory and skip PID-1 duties")
	fs.StringVar(&o.listen, "listen", fmt.Sprintf(":%d", client.MachinePort), "address of the machine API")
	fs.StringVar(&o.token, "token", "", "bootstrap token for the maintenance API (default: cairn.token= from the kernel command line, else random and printed)")
	fs.StringVar(&o.join, "join", "", "sandbox mode: join the cluster whose join service is at HOST:PORT (cairn.join=)")
	fs.StringVar(&o.joinToken, "join-token", "", "sandbox mode: the join token (cairn.jointoken=)")
	fs.StringVar(&o.joinCA, "join-ca", "", "SHA-256 of the cluster's machine CA certificate to pin when joining (cairn.joinca=)")
	fs.StringVar(&o.hostname, "hostname", "", "the node's hostname before a config sets one (cairn.hostname=)")
	fs.StringVar(&o.cmdline, "cmdline", "", "sandbox mode: a kernel command line to read settings from, instead of none")
	fs.BoolVar(&o.hostDisks, "host-disks", false, "sandbox mode: put volumes on the host's block devices that the config selects (run in a private mount namespace), instead of directories under --root")
	fs.StringVar(&o.joinListen, "join-listen", fmt.Sprintf(":%d", client.JoinPort), "address of the join service (control-plane nodes in Running)")
	fs.StringVar(&o.payload, "payload", "", "sandbox mode: the Kubernetes payload directory (_out/payload, made by make payload) with containerd, runc, the CNI plugins and the images")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 && !pid1 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parseFlags(args, os.Stderr, os.Getpid() == 1)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if os.Getpid() == 1 {
		return runPID1(o, log)
	}
	if o.root == "" {
		return errors.New("not PID 1: give --root DIR to run in sandbox mode")
	}
	if o.root, err = filepath.Abs(o.root); err != nil {
		return err
	}
	p, err := settings(o, o.cmdline)
	if err != nil {
		return err
	}
	return serve(ctx, o, p, sandboxPlatform(o, log), log)
}

// settings reads the kernel command line's parameters; flags win over it.
func settings(o options, line string) (cmdline.Params, error) {
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
