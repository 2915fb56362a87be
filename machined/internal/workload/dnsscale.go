package workload

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/machined/internal/addons"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// coreDNSPath is the CoreDNS Deployment's item path.
const coreDNSPath = "/apis/apps/v1/namespaces/" + addons.Namespace + "/deployments/" + addons.CoreDNSDeployment

// coreDNSReplicas works out the replica count CoreDNS should run when the config sets none
// (addons.CoreDNSReplicas), from the count its Deployment runs now (0 when there is none, returned too)
// and the cluster's nodes.
func (w *Workload) coreDNSReplicas(ctx context.Context, c *kubeapi.Client, nodes []corev1.Node) (current, want int32, n addons.NodeCount, err error) {
	var d appsv1.Deployment
	switch err := c.Get(ctx, coreDNSPath, &d); {
	case kubeapi.IsNotFound(err):
	case err != nil:
		return 0, 0, n, fmt.Errorf("read the CoreDNS Deployment: %w", err)
	case d.Spec.Replicas == nil:
		current = 1 // the API server's default
	default:
		current = *d.Spec.Replicas
	}
	n = addons.CountNodes(nodes)
	return current, addons.CoreDNSReplicas(w.config().Cluster.CoreDNS, current, n), n, nil
}

// scaleCoreDNS keeps CoreDNS's replica count what the cluster's nodes call for, when the config sets
// none: a second replica once a second node is Ready, one again once a single node is left. Every
// control plane runs it at its pass over the Nodes (nodePass); they work out the same count from the
// same objects. A Deployment that is not there is left to the add-ons' apply at the next boot.
func (w *Workload) scaleCoreDNS(ctx context.Context, c *kubeapi.Client, nodes []corev1.Node) {
	if dns := w.config().Cluster.CoreDNS; dns.Disabled || dns.Replicas > 0 {
		return
	}
	current, want, n, err := w.coreDNSReplicas(ctx, c, nodes)
	if err != nil {
		if ctx.Err() == nil {
			w.Log.Warn("CoreDNS's replica count not checked; the next pass retries", "err", err)
		}
		return
	}
	if current == 0 || want == current {
		return
	}
	if err := c.Patch(ctx, coreDNSPath, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, want)); err != nil {
		if ctx.Err() == nil {
			w.Log.Warn("CoreDNS not scaled; the next pass retries", "from", current, "to", want, "err", err)
		}
		return
	}
	w.Log.Info("CoreDNS scaled to the cluster's nodes", "from", current, "to", want, "schedulable", n.Schedulable, "ready", n.Ready)
}
