// Package cmd holds cairnctl's commands. Each command is thin: it reads flags, calls the machine API
// through api/client, and prints the answer for people (default) or scripts (-o json).
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
)

// Set at build time with -ldflags -X.
var (
	Version = "dev"
	Commit  = ""
)

// globals are the flags every command shares.
type globals struct {
	nodes        []string
	cairnconfig  string
	context      string
	token        string
	fingerprint  string
	insecureSkip bool
	clockSkew    string
	output       string
	stdout       io.Writer
	stderr       io.Writer
}

// Execute runs cairnctl and returns the exit code.
func Execute() int {
	return run(os.Args[1:], os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	g := &globals{stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	help := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if unknownSubcommand(cmd) == nil { // else the refusal below says what is wrong, without the help
			help(cmd, args)
		}
	})
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		err = unknownSubcommand(cmd)
	}
	if err != nil {
		fmt.Fprintln(stderr, "cairnctl:", describe(err))
		return 1
	}
	return 0
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "cairnctl",
		Short: "Manage Cairn nodes through their machine API",
		Long: `cairnctl manages Cairn nodes. A node has no shell and no SSH: its machine API (gRPC over TLS,
port 50000) is the only way in.

A node that is not configured yet serves the maintenance API: pass its bootstrap token (--token) and
pin its certificate (--fingerprint, printed on its console) or say --insecure-skip-verify. After Init or
Join, the node accepts only client certificates from the cluster's machine CA: use the cairnconfig that
'cairnctl gen config' wrote (--cairnconfig, $CAIRNCONFIG or ~/.cairn/config).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	f := root.PersistentFlags()
	f.StringSliceVarP(&g.nodes, "nodes", "n", nil, "nodes to talk to, HOST[:PORT][,...] (port 50000 by default; default: the cairnconfig's endpoints)")
	f.StringVar(&g.cairnconfig, "cairnconfig", "", "client config with the cluster's CA and a client certificate (default $CAIRNCONFIG, then ~/.cairn/config)")
	f.StringVar(&g.context, "context", "", "context of the cairnconfig to use (default: its current one)")
	f.StringVar(&g.token, "token", "", "bootstrap token of a node in maintenance mode")
	f.StringVar(&g.fingerprint, "fingerprint", "", "SHA-256 fingerprint of a maintenance node's certificate, as printed on its console")
	f.BoolVar(&g.insecureSkip, "insecure-skip-verify", false, "maintenance mode: do not verify the node's certificate (anyone on the path could read the token)")
	f.StringVar(&g.clockSkew, "clock-skew", "", "mutual TLS: the node's clock runs this far ahead of this host's (e.g. 300d, a VM started with cluster start --clock-offset); its certificate is verified at its time")
	f.StringVarP(&g.output, "output", "o", "text", "output format: text or json")

	root.AddCommand(
		newVersion(g), newGen(g), newStatus(g), newNetwork(g), newGet(g), newApply(g), newEdit(g), newConfigHistory(g), newTPM(g), newEvents(g), newInit(g), newServices(g),
		newReboot(g), newShutdown(g), newReset(g), newPlan(g), newDisks(g), newMounts(g), newKubeconfig(g), newHealth(g),
		newCluster(g), newJoin(g), newJoinToken(g), newService(g),
		newLogs(g), newDmesg(g), newEtcd(g), newCerts(g),
		newImage(g), newDebug(g), newUpgrade(g), newRollback(g), newInstall(g),
	)
	return root
}

// configPath is the cairnconfig to read: --cairnconfig, else $CAIRNCONFIG, else ~/.cairn/config.
func (g *globals) configPath() string {
	if g.cairnconfig != "" {
		return g.cairnconfig
	}
	return client.DefaultConfigPath()
}

// clients opens a connection to each selected node.
func (g *globals) clients() ([]nodeClient, func(), error) {
	if g.output != "text" && g.output != "json" {
		return nil, nil, fmt.Errorf("--output must be text or json, not %q", g.output)
	}
	var ctx *client.Context
	nodes := g.nodes
	if g.token == "" || len(nodes) == 0 {
		path := g.configPath()
		cfg, err := client.LoadConfig(path)
		switch {
		case err == nil:
			if ctx, err = cfg.Current(g.context); err != nil {
				return nil, nil, err
			}
			if len(nodes) == 0 {
				nodes = ctx.Endpoints
			}
		case g.token == "":
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil, fmt.Errorf("no credentials: %s does not exist; give --token for a node in maintenance mode, or --cairnconfig", path)
			}
			return nil, nil, err
		}
	}
	if len(nodes) == 0 {
		return nil, nil, errors.New("no node given: use --nodes HOST[:PORT]")
	}
	var skew time.Duration
	if g.clockSkew != "" {
		var err error
		if skew, err = parseOffset("--clock-skew", g.clockSkew); err != nil {
			return nil, nil, err
		}
	}
	var out []nodeClient
	var conns []*grpc.ClientConn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for _, n := range nodes {
		o := client.Options{Endpoint: n, Token: g.token, Fingerprint: g.fingerprint, InsecureSkipVerify: g.insecureSkip, ClockSkew: skew}
		if g.token == "" {
			o.Context = ctx
		}
		mc, conn, err := client.Connect(o)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("node %s: %w", n, err)
		}
		conns = append(conns, conn)
		out = append(out, nodeClient{name: n, MachineClient: mc})
	}
	return out, closeAll, nil
}

type nodeClient struct {
	name string
	machine.MachineClient
}

// firstNode runs f against the first selected node: for calls whose answer is the cluster's (join
// tokens, a kubeconfig), not one per node.
func (g *globals) firstNode(f func(nc nodeClient) error) error {
	ncs, closeAll, err := g.clients()
	if err != nil {
		return err
	}
	defer closeAll()
	return f(ncs[0])
}

// eachNode runs f for every selected node and reports every failure, naming the node.
func (g *globals) eachNode(f func(nc nodeClient, prefix string) error) error {
	ncs, closeAll, err := g.clients()
	if err != nil {
		return err
	}
	defer closeAll()
	var errs []string
	for _, nc := range ncs {
		prefix := ""
		if len(ncs) > 1 {
			prefix = nc.name + ": "
		}
		if err := f(nc, prefix); err != nil {
			errs = append(errs, fmt.Sprintf("node %s: %s", nc.name, describe(err)))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// describe prints a gRPC error as its code and message, without the library's prefix.
func describe(err error) string {
	if s, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s: %s", s.Code(), s.Message())
	}
	return err.Error()
}

// unknownSubcommand refuses what cobra lets through below the root: a group (cairnctl tpm, cairnctl
// etcd, ...) given a subcommand it does not have. cobra checks that only for the root, and a group, which
// does not run, prints its help for any arguments: "cairnctl tpm status" printed tpm's help and exited 0,
// as if something had run. A group named alone still prints its help.
func unknownSubcommand(cmd *cobra.Command) error {
	args := cmd.Flags().Args()
	if !cmd.HasSubCommands() || cmd.Runnable() || len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only on the root
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%s (cairnctl %s --help lists them)", msg, strings.TrimPrefix(cmd.CommandPath(), "cairnctl "))
}
