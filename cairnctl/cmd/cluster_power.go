package cmd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/cairnctl/internal/cluster"
)

func newClusterStop(g *globals, root func() (string, error)) *cobra.Command {
	var o cluster.PowerOptions
	c := &cobra.Command{
		Use:   "stop --name NAME [--node NODE]...",
		Short: "Pull the plug of a local cluster's VMs (a power cut: the nodes are not told)",
		Long: `stop kills the QEMU of each node (every node of the cluster unless --node names some), as a power cut
would: the node gets no chance to stop its services or unmount its disks. Its disks are kept; 'cluster
start' powers it on again. To stop a node cleanly, run 'cairnctl shutdown' against it instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Name == "" {
				return errors.New("--name is required")
			}
			r, err := root()
			if err != nil {
				return err
			}
			o.Root = r
			return cluster.PowerOff(cmd.Context(), o, cluster.NewProgress(g.stdout))
		},
	}
	c.Flags().StringVar(&o.Name, "name", "", "the cluster (required)")
	c.Flags().StringSliceVar(&o.Nodes, "node", nil, "a node to stop (repeatable; default: every node)")
	return c
}

func newClusterStart(g *globals, root func() (string, error)) *cobra.Command {
	var (
		o      cluster.PowerOptions
		offset string
	)
	c := &cobra.Command{
		Use:   "start --name NAME [--node NODE]... [--clock-offset 300d]",
		Short: "Power a local cluster's stopped VMs on again, with their disks and ports",
		Long: `start boots each stopped node again (every node of the cluster unless --node names some) with the disks,
the L2 address and the host ports it had, so the cluster's cairnconfig and kubeconfig still reach it. The
node boots to where its lock says: Running for a configured node, maintenance mode for a fresh one.

--clock-offset starts the VMs' clocks ahead of this host's (e.g. 300d, 2160h): a node powered on months
later, which renews the certificates that come due on its way to Running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := localCluster(o.Name, root, &o.ImageDir)
			if err != nil {
				return err
			}
			o.Root = r
			if offset != "" {
				if o.ClockOffset, err = parseOffset("--clock-offset", offset); err != nil {
					return err
				}
			}
			return cluster.PowerOn(cmd.Context(), o, cluster.NewProgress(g.stdout))
		},
	}
	c.Flags().StringVar(&o.Name, "name", "", "the cluster (required)")
	c.Flags().StringSliceVar(&o.Nodes, "node", nil, "a node to start (repeatable; default: every stopped node)")
	c.Flags().StringVar(&o.ImageDir, "image-dir", "", "directory with the built image (default: the _out of cairnctl's repository, else ./_out)")
	c.Flags().StringVar(&offset, "clock-offset", "", "start the VMs' clocks this far ahead of the host's: a Go duration or a number of days (300d)")
	c.Flags().DurationVar(&o.BootTimeout, "boot-timeout", 5*time.Minute, "how long to wait for each node's machine API")
	return c
}

// parseOffset reads flag's value, a duration, with a "d" suffix for days.
func parseOffset(flag, s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %q is not a number of days", flag, s, d)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", flag, s, err)
	}
	return d, nil
}
