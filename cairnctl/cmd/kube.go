package cmd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newKubeconfig(g *globals) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "kubeconfig [FILE]",
		Short: "Write an admin kubeconfig for the cluster (admin only); to stdout without FILE",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r *machine.KubeconfigResponse
			err := g.firstNode(func(nc nodeClient) (err error) {
				r, err = nc.Kubeconfig(cmd.Context(), &machine.KubeconfigRequest{})
				return err
			})
			if err != nil {
				return err
			}
			if len(args) == 0 {
				_, err := g.stdout.Write(r.Kubeconfig)
				return err
			}
			if _, err := os.Stat(args[0]); err == nil && !force {
				return fmt.Errorf("%s exists; pass --force to overwrite it", args[0])
			}
			if err := os.WriteFile(args[0], r.Kubeconfig, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "wrote %s\n", args[0])
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "overwrite FILE")
	return c
}

func newHealth(g *globals) *cobra.Command {
	var wait time.Duration
	c := &cobra.Command{
		Use:   "health",
		Short: "Wait until the node's Kubernetes and the cluster's add-ons are healthy",
		Long: `health checks the node's Kubernetes and prints each check. On a control plane: etcd healthy,
kube-apiserver ready, the control-plane pods running and ready, the node Ready, kube-proxy and flannel ready
on every node, CoreDNS's replicas ready. On a worker: the node Ready, its kube-proxy and flannel pods ready.
On both: kubernetes.default looked up through the kube-dns Service from the node, which proves the node's
Service rules, CoreDNS, and a pod's way to the API server through the kubernetes Service. Add-ons switched
off in the config are not checked. It retries until every check passes or --wait runs out (0: check once),
and exits non-zero if any check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				ctx, cancel := cmd.Context(), context.CancelFunc(func() {})
				if wait > 0 {
					ctx, cancel = context.WithTimeout(ctx, wait)
				}
				defer cancel()
				// The last answer is what the node said before time ran out: a wait that ends in a timeout
				// shows which checks still failed and why, not only that it timed out.
				var r *machine.HealthResponse
				var err error
				for {
					resp, rerr := nc.Health(ctx, &machine.HealthRequest{})
					if rerr == nil || r == nil {
						r, err = resp, rerr
					}
					if (rerr == nil && resp.Ok) || wait == 0 || ctx.Err() != nil {
						break
					}
					select {
					case <-ctx.Done():
					case <-time.After(3 * time.Second):
					}
				}
				if r == nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				w := table(g.stdout)
				for _, c := range r.Checks {
					mark := "ok"
					if !c.Ok {
						mark = "FAIL"
					}
					fmt.Fprintf(w, "%s%s\t%s\t%s\n", prefix, c.Name, mark, c.Message)
				}
				w.Flush()
				if !r.Ok {
					var failed []string
					for _, c := range r.Checks {
						if !c.Ok {
							failed = append(failed, c.Name)
						}
					}
					if wait > 0 {
						return fmt.Errorf("not healthy after waiting %v: %s", wait, strings.Join(failed, ", "))
					}
					return fmt.Errorf("not healthy: %s", strings.Join(failed, ", "))
				}
				return nil
			})
		},
	}
	c.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for every check to pass")
	return c
}
