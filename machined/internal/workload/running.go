package workload

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/certs"
	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// How often a Running node refreshes its discovery names and checks its certificates.
const (
	namesInterval     = 30 * time.Second
	certCheckInterval = 12 * time.Hour
	// restartTimeout bounds one control-plane component's restart, until it is healthy again.
	restartTimeout = 10 * time.Minute
)

// WhileRunning is the node's work while it is Running (node.Hooks.Running): the discovery names follow
// the cluster's membership, a control plane puts on every Node the labels and taints its node asks for
// (nodespec.go), keeps CoreDNS's replica count to the cluster's size (dnsscale.go), renews its
// certificates when they come due, which a node that runs for months without a reboot needs, and has
// its API server build its OpenAPI cache once the add-ons are up (openapi.go).
// It returns when ctx ends.
func (w *Workload) WhileRunning(ctx context.Context, c *config.MachineConfig) {
	names := time.NewTicker(namesInterval)
	defer names.Stop()
	check := time.NewTicker(certCheckInterval)
	defer check.Stop()
	csrs := time.NewTicker(csrApproveInterval)
	defer csrs.Stop()
	cp := c != nil && c.Machine.Type == config.TypeControlPlane
	if cp {
		w.approveServingCSRs(ctx) // this node's own kubelet asked while the control plane came up
		go w.warmOpenAPIWhenSettled(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-csrs.C:
			if cp {
				w.approveServingCSRs(ctx)
			}
		case <-names.C:
			w.refreshNames(ctx)
			if cp {
				w.nodePass(ctx)
			}
		case <-check.C:
			if !cp {
				continue
			}
			if err := w.renewer().renew(ctx); err != nil && ctx.Err() == nil {
				w.Log.Error("certificate renewal failed; the next check retries", "err", err, "next", certCheckInterval)
			}
		}
	}
}

func (w *Workload) refreshNames(ctx context.Context) {
	if w.Hosts == nil {
		return
	}
	// A refresh that learns nothing keeps what /etc/hosts has: publishing only this node (what Members
	// falls back to) would take its peers' names away from its etcd member while its API is down.
	a := w.currentMembers(ctx)
	if m := a.over(w.knownMembers()); a.answered() && len(m) > 0 {
		w.publishNames(m)
	}
}

// renewal re-issues a Running control plane's certificates and restarts its components onto them. Its
// steps are parameters so a unit test can check the order without a cluster.
type renewal struct {
	now     func() time.Time
	list    func(context.Context) ([]certs.Cert, error)
	reissue func(context.Context) error
	// restart stops a control-plane component so the kubelet starts it again, and returns once the new
	// one is healthy.
	restart func(ctx context.Context, component string) error
	log     interface{ Info(string, ...any) }
}

// restartOrder: etcd first, which the API server needs; then the API server, which the others need.
// One at a time, each healthy before the next, so a cluster of several control planes keeps quorum and
// an API server throughout, and a single control plane is without its API only for one restart.
var restartOrder = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

func (r renewal) renew(ctx context.Context) error {
	list, err := r.list(ctx)
	due := certs.Due(list, r.now())
	if err == nil && len(due) == 0 {
		return nil
	}
	var names []string
	for _, c := range due {
		names = append(names, c.Name)
	}
	r.log.Info("renewing the control plane's certificates while Running", "due", names, "unreadable", err)
	if err := r.reissue(ctx); err != nil {
		return fmt.Errorf("re-issue certificates: %w", err)
	}
	for _, comp := range restartOrder {
		rctx, cancel := context.WithTimeout(ctx, restartTimeout)
		err := r.restart(rctx, comp)
		cancel()
		if err != nil {
			return fmt.Errorf("restart %s onto its new certificates: %w", comp, err)
		}
		r.log.Info("restarted onto new certificates", "component", comp)
	}
	return nil
}

func (w *Workload) renewer() renewal {
	return renewal{now: w.Now, list: w.Certificates, reissue: w.writePKI, restart: w.restartStaticPod, log: w.Log}
}

// restartStaticPod stops a control-plane component's container (the kubelet starts a new one, which reads
// the certificates afresh) and waits until the component is healthy again.
func (w *Workload) restartStaticPod(ctx context.Context, component string) error {
	cli := w.containerdClient()
	if cli == nil {
		return errors.New("containerd is not running")
	}
	nctx := namespaces.WithNamespace(ctx, containerd.NamespaceK8s)
	ctrs, err := cli.Containers(nctx, fmt.Sprintf(`labels."io.kubernetes.container.name"==%s,labels."io.kubernetes.pod.namespace"==kube-system`, component))
	if err != nil {
		return fmt.Errorf("list %s containers: %w", component, err)
	}
	stopped := 0
	for _, c := range ctrs {
		task, err := c.Task(nctx, nil)
		if err != nil {
			continue // an exited container of an earlier run
		}
		exit, err := task.Wait(nctx)
		if err != nil {
			continue
		}
		if err := task.Kill(nctx, syscall.SIGTERM, client.WithKillAll); err != nil {
			return fmt.Errorf("stop %s: %w", component, err)
		}
		select {
		case <-exit:
			stopped++
		case <-ctx.Done():
			return fmt.Errorf("%s did not stop: %w", component, ctx.Err())
		}
	}
	if stopped == 0 {
		return fmt.Errorf("no running %s container found", component)
	}
	return kubeapi.Poll(ctx, 2*time.Second, w.healthOf(component))
}

// healthOf is the check that says a restarted component serves again.
func (w *Workload) healthOf(component string) func(context.Context) error {
	switch component {
	case "etcd":
		return w.EtcdHealthy
	case "kube-apiserver":
		return w.APIServerReady
	default:
		return func(ctx context.Context) error { _, err := w.controlPlanePodsRunning(ctx); return err }
	}
}
