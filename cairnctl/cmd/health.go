package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/cairnctl/internal/cluster"
)

// healthRetry is the pause between two Health calls while health waits. A call asks the API server a
// handful of reads and etcd for its members, and on an emulated node that is still starting its add-ons
// those cost it CPU (a fifth of machined's own CPU in Running was these calls at this pause).
const healthRetry = 3 * time.Second

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
off in the config are not checked. The node runs its checks at the same time. It retries until every check
passes or --wait runs out (0: check once), printing to stderr which checks still fail whenever that
changes, and exits non-zero if any check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				ctx, cancel := cmd.Context(), context.CancelFunc(func() {})
				if wait > 0 {
					ctx, cancel = context.WithTimeout(ctx, wait)
				}
				defer cancel()
				r, err := askHealth(ctx, nc, wait > 0, g.stderr, prefix)
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
				if failed, _ := cluster.FailedChecks(r); len(failed) > 0 {
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

// askHealth asks the node for its health; with wait, until every check passes or ctx ends (WaitHealthy,
// the loop cluster create waits with), writing a line to progress whenever the failing checks change or
// the node stops answering, so a wait of minutes shows where it stands. It returns the node's last answer
// (a wait that runs out shows which checks still failed and why), or, when none came, the last error.
func askHealth(ctx context.Context, nc nodeClient, wait bool, progress io.Writer, prefix string) (*machine.HealthResponse, error) {
	var last *machine.HealthResponse
	var lastErr error
	start, saidErr := time.Now(), ""
	say := func(what string) {
		fmt.Fprintf(progress, "%s[%5.0fs] waiting: %s\n", prefix, time.Since(start).Seconds(), what)
	}
	check := func(ctx context.Context) (*machine.HealthResponse, error) {
		r, err := nc.Health(ctx, &machine.HealthRequest{})
		if err == nil {
			last, saidErr = r, ""
			return r, nil
		}
		if last == nil {
			lastErr = err
		}
		// WaitHealthy reports the failing checks; an error is said here, once until the node answers again.
		if wait && describe(err) != saidErr {
			saidErr = describe(err)
			say(saidErr)
		}
		return r, err
	}
	if !wait {
		_, _ = check(ctx)
	} else if err := cluster.WaitHealthy(ctx, check, healthRetry, func(failing []string) { say(strings.Join(failing, "; ")) }); err != nil && lastErr == nil {
		lastErr = err
	}
	if last == nil {
		return nil, lastErr
	}
	return last, nil
}
