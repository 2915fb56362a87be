package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
)

// healthAttempt bounds one Health call: the node looks names up and asks its API server, which is
// slow on a busy emulated control plane.
const healthAttempt = 30 * time.Second

// WaitHealthy asks check until the node answers that every check passes, pausing between answers, and
// calls report each time the list of failing checks changes (with their messages). When ctx ends first
// it returns an error naming the checks that still failed, or the last error reaching the node.
func WaitHealthy(ctx context.Context, check func(context.Context) (*machine.HealthResponse, error), pause time.Duration,
	report func(failing []string)) error {
	var failing, shown []string
	var last error
	for {
		r, err := check(ctx)
		switch {
		case err == nil && r.Ok:
			return nil
		case err == nil:
			names, now := FailedChecks(r)
			if !slices.Equal(names, failing) {
				report(now)
			}
			failing, shown, last = names, now, nil
		default:
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("not healthy: %w (last error: %v)", ctx.Err(), last)
			}
			return fmt.Errorf("not healthy: %w; failing: %s", ctx.Err(), strings.Join(shown, "; "))
		case <-time.After(pause):
		}
	}
}

// FailedChecks returns the names of the failed checks, and each with its message. A change in the names
// is news; a message alone changes often ("1 of 2 ready").
func FailedChecks(r *machine.HealthResponse) (names, shown []string) {
	for _, c := range r.Checks {
		if !c.Ok {
			names, shown = append(names, c.Name), append(shown, c.Name+" ("+c.Message+")")
		}
	}
	return names, shown
}

// healthOnce is one Health call on its own connection.
func healthOnce(ctx context.Context, connect Connect) (*machine.HealthResponse, error) {
	return callOnce(ctx, connect, healthAttempt, func(ctx context.Context, mc machine.MachineClient) (*machine.HealthResponse, error) {
		return mc.Health(ctx, &machine.HealthRequest{})
	})
}

// settleWait bounds how long create waits for the first control plane's health before the joins.
const settleWait = 10 * time.Minute

// waitSettled waits until the first control plane is healthy (its add-ons ready) before the other nodes
// join. Right after Init a control plane is at its busiest, starting CoreDNS, flannel and kube-proxy and
// filling its controllers' caches; a join at that moment added its CSR, its node and its DaemonSet pods,
// and on an emulated control plane (with the joining VM taking host CPU too) the API server stalled past
// the controller-manager's lease and a worker's certificate waited minutes for a restarted
// controller-manager. A control plane that does not settle in time is joined anyway, with a warning.
func waitSettled(ctx context.Context, first NodeState, cctx *client.Context, p *Progress) {
	p.Printf("%s: waiting until it is healthy before the joins", first.Name)
	hctx, cancel := context.WithTimeout(ctx, settleWait)
	defer cancel()
	connect := Dialer(client.Options{Endpoint: first.APIEndpoint(), Context: cctx})
	err := WaitHealthy(hctx, func(c context.Context) (*machine.HealthResponse, error) {
		r, err := healthOnce(c, connect)
		if err == nil && !r.Ok && settledForJoins(r) {
			p.Printf("%s: DNS answers; CoreDNS's other replicas wait for the nodes that join to have room", first.Name)
			return &machine.HealthResponse{Ok: true, Checks: r.Checks}, nil
		}
		return r, err
	}, 3*time.Second, func(failing []string) {
		p.Printf("%s: not healthy yet: %s", first.Name, strings.Join(failing, "; "))
	})
	if err != nil {
		p.Printf("%s: %v; joining the other nodes anyway", first.Name, err)
		return
	}
	p.Printf("%s: healthy", first.Name)
}

// settledForJoins: a control plane whose only failing check is CoreDNS's replica count, while DNS
// answers, is settled enough for the joins. A control plane of one vCPU has no room for the second
// replica (its own pods request 950m of its 1000m), which waits for the nodes that join; waiting for it
// cost `cluster create --controlplanes 3` on two host cores all of settleWait.
func settledForJoins(r *machine.HealthResponse) bool {
	names, _ := FailedChecks(r)
	if !slices.Equal(names, []string{"coredns"}) {
		return false
	}
	for _, c := range r.Checks {
		if c.Name == "service-dns" {
			return c.Ok
		}
	}
	return false
}
