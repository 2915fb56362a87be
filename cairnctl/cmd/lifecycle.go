package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/cairnctl/internal/cluster"
)

func newEvents(g *globals) *cobra.Command {
	var follow bool
	var tail uint32
	c := &cobra.Command{
		Use:   "events",
		Short: "Show the node's events: state transitions, tasks, services, refused requests",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				s, err := nc.Events(cmd.Context(), &machine.EventsRequest{Follow: follow, Tail: tail})
				if err != nil {
					return err
				}
				return g.printEvents(s, prefix)
			})
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	c.Flags().Uint32Var(&tail, "tail", 0, "show only the last N kept events (0: all)")
	return c
}

func (g *globals) printEvents(s grpc.ServerStreamingClient[machine.Event], prefix string) error {
	for {
		e, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if g.output == "json" {
			if err := printJSON(g.stdout, e); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(g.stdout, prefix+formatEvent(e))
	}
}

func newInit(g *globals) *cobra.Command {
	var file, snapshot string
	var detach bool
	c := &cobra.Command{
		Use:   "init --config controlplane.yaml [--etcd-snapshot FILE]",
		Short: "Initialise a new cluster on a node in maintenance mode",
		Long: `Init sends a control-plane config to a node in Boot. The node validates it (every problem is
reported with its field path), takes its node lock, and runs the Init sequence; cairnctl prints each step
until the node is Running, or returns at once with --detach. After the lock, the node accepts only client
certificates from the cluster's machine CA (the cairnconfig from 'cairnctl gen config').

With --etcd-snapshot, the new control plane starts etcd from a snapshot ('cairnctl etcd snapshot') and so
restores a whole cluster's state; use the configs (secrets) of the cluster the snapshot came from.

When the config asks for an encrypted STATE (machine.disks.state.encryption: tpm), cairnctl makes a
recovery key, sends it with Init and prints it once, on standard error: the node keeps it nowhere. With
it, cryptsetup opens the node's STATE on any machine should the node's TPM ever refuse its key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := readFile(file, "--config")
			if err != nil {
				return err
			}
			var snap []byte
			if snapshot != "" {
				if snap, err = os.ReadFile(snapshot); err != nil {
					return err
				}
			}
			return g.eachNode(func(nc nodeClient, prefix string) error {
				recovery, err := cluster.StateRecoveryKey(cfg)
				if err != nil {
					return err
				}
				if recovery != "" {
					fmt.Fprintln(g.stderr, cluster.RecoveryNotice(nc.name, recovery))
				}
				s, err := nc.Init(cmd.Context(), &machine.InitRequest{Config: cfg, Detach: detach, EtcdSnapshot: snap, StateRecoveryKey: recovery})
				if err != nil {
					return err
				}
				return g.printEvents(s, prefix)
			})
		},
	}
	c.Flags().StringVarP(&file, "config", "c", "", "the control-plane machine config (required)")
	c.Flags().BoolVar(&detach, "detach", false, "return once the node has taken its lock instead of following Init to the end")
	c.Flags().StringVar(&snapshot, "etcd-snapshot", "", "restore the cluster's state from this etcd snapshot")
	return c
}

func newReboot(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reboot",
		Short: "Reboot the node; a configured node comes back Running with its data",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				if _, err := nc.Reboot(cmd.Context(), &machine.RebootRequest{}); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%snode %s is rebooting\n", prefix, nc.name)
				return nil
			})
		},
	}
}

func newShutdown(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "shutdown",
		Short: "Stop the node's services and power it off",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				if _, err := nc.Shutdown(cmd.Context(), &machine.ShutdownRequest{}); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%snode %s is shutting down\n", prefix, nc.name)
				return nil
			})
		},
	}
}

func newReset(g *globals) *cobra.Command {
	var wipe []string
	var graceful, noReboot bool
	c := &cobra.Command{
		Use:   "reset",
		Short: "Wipe the node's Cairn volumes and reboot it into Boot (admin only)",
		Long: `Reset stops the node, leaves the cluster (graceful, the default: cordon, drain, leave etcd),
wipes the volumes named by --wipe (default state,ephemeral; 'all' adds etcd) and reboots into Boot. Only
disks carrying Cairn's label are wiped; the boot medium never is.

A graceful reset must wipe state: the node leaves its cluster, so it cannot keep its lock and identity.
With --graceful=false and --wipe without state (say --wipe ephemeral) the node stays a member and comes
back Running with that volume empty.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				if _, err := nc.Reset(cmd.Context(), &machine.ResetRequest{Wipe: wipe, Graceful: graceful, NoReboot: noReboot}); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%snode %s is resetting\n", prefix, nc.name)
				return nil
			})
		},
	}
	c.Flags().StringSliceVar(&wipe, "wipe", nil, "volumes to wipe: state, ephemeral, etcd or all (default state,ephemeral)")
	c.Flags().BoolVar(&graceful, "graceful", true, "cordon and drain the node and leave etcd first; false for a node whose cluster is gone")
	c.Flags().BoolVar(&noReboot, "no-reboot", false, "power off after the wipe instead of rebooting")
	return c
}

func readFile(path, flag string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("%s FILE is required", flag)
	}
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}
