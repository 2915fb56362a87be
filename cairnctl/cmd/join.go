package cmd

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/cairnctl/internal/cluster"
)

func newJoin(g *globals) *cobra.Command {
	var file, cp string
	var joinPort int
	var detach bool
	c := &cobra.Command{
		Use:   "join --config worker.yaml --cluster CPNODE[:PORT]",
		Short: "Join a node in maintenance mode to a running cluster",
		Long: `join adds the node named by --nodes (in Boot, reached with its --token and --fingerprint) to the
cluster of the control-plane node --cluster. With the cairnconfig's admin certificate, cairnctl asks
that control plane for a single-use join token (role from the config's machine.type, valid 10 minutes),
reads the new node's machine public key, asks the control plane's join service (port 50001, verified
against the cluster's machine CA) for a ticket signed for that key, and sends the ticket and the config
to the new node's Join. It prints each step until the node is Running, or returns once the node has
taken its lock with --detach. A control plane too busy to make the token or issue the ticket (its API
server or etcd not answering in time: Unavailable with a retry delay, 10 seconds) is asked again with a
new token after that delay, for 5 minutes, with a line on stderr each time; after that the last refusal
is the error.

  cairnctl --nodes NEWNODE --token T --fingerprint F join --config worker.yaml --cluster CPNODE`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := readFile(file, "--config")
			if err != nil {
				return err
			}
			if len(g.nodes) != 1 {
				return fmt.Errorf("--nodes must name the one joining node, not %d", len(g.nodes))
			}
			if g.token == "" {
				return errors.New("--token is required: the joining node's bootstrap token (it is in maintenance mode)")
			}
			if cp == "" {
				return errors.New("--cluster CPNODE[:PORT] is required: a control-plane node of the cluster to join")
			}
			if g.output != "text" && g.output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", g.output)
			}
			path := g.configPath()
			cc, err := client.LoadConfig(path)
			if err != nil {
				return fmt.Errorf("the control plane is reached with the cluster's cairnconfig: %w", err)
			}
			ctx, err := cc.Current(g.context)
			if err != nil {
				return err
			}
			recovery, err := cluster.StateRecoveryKey(cfg)
			if err != nil {
				return err
			}
			t := cluster.JoinTarget{
				Node:         client.Options{Endpoint: g.nodes[0], Token: g.token, Fingerprint: g.fingerprint, InsecureSkipVerify: g.insecureSkip},
				ControlPlane: cp,
				JoinService:  joinAddr(cp, joinPort),
				Context:      ctx,
				RecoveryKey:  recovery,
				Retrying:     func(notice string) { fmt.Fprintln(g.stderr, notice) },
			}
			if recovery != "" {
				// Before the join: a node that took its lock has the key, whatever happens to this stream.
				fmt.Fprintln(g.stderr, cluster.RecoveryNotice(g.nodes[0], recovery))
			}
			var printErr error
			err = cluster.JoinNode(cmd.Context(), t, cfg, detach, func(e *machine.Event) {
				if g.output == "json" {
					if err := printJSON(g.stdout, e); err != nil && printErr == nil {
						printErr = err
					}
					return
				}
				fmt.Fprintln(g.stdout, formatEvent(e))
			})
			if err != nil {
				return err
			}
			return printErr
		},
	}
	f := c.Flags()
	f.StringVarP(&file, "config", "c", "", "the joining node's machine config, worker or controlplane (required)")
	f.StringVar(&cp, "cluster", "", "a control-plane node of the cluster, HOST[:PORT] of its machine API (port 50000 by default)")
	f.IntVar(&joinPort, "join-port", client.JoinPort, "port of the control plane's join service on the --cluster host (for forwarded ports)")
	f.BoolVar(&detach, "detach", false, "return once the node has taken its lock instead of following Join to the end")
	return c
}

// joinAddr is the join service on the --cluster host.
func joinAddr(cp string, port int) string {
	host := cp
	if h, _, err := net.SplitHostPort(cp); err == nil {
		host = h
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}
