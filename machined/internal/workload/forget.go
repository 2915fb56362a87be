package workload

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// LeftAnnotation is set on its own Node by a node that resets gracefully, with the time it left. A
// kubelet may not delete Node objects, only patch its own, so a worker says it is leaving and the control
// planes delete its Node once it has gone quiet (forgetLeftNodes); a control plane deletes its own with its
// admin credentials.
const LeftAnnotation = "cairn.dev/left-at"

// leftNodeGrace is how long after a node said it left its Node is kept: the reset's stop tasks end its
// kubelet within it.
const leftNodeGrace = 30 * time.Second

// markLeft records on the node's own Node that it leaves the cluster now; a control plane also deletes
// the Node at once.
func (w *Workload) markLeft(ctx context.Context) error {
	c, err := w.nodeClient()
	if err != nil {
		return err
	}
	name, _ := w.Identity()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, LeftAnnotation, w.Now().UTC().Format(time.RFC3339))
	if err := c.Patch(ctx, "/api/v1/nodes/"+name, []byte(patch)); err != nil {
		return fmt.Errorf("mark Node %s as leaving: %w", name, err)
	}
	if !w.controlPlane() {
		return nil
	}
	admin, err := w.admin()
	if err != nil {
		return err
	}
	if err := admin.Delete(ctx, "/api/v1/nodes/"+name); err != nil {
		return fmt.Errorf("delete Node %s: %w", name, err)
	}
	return nil
}

// nodePass is a control plane's pass over the cluster's Nodes while Running (every namesInterval): the
// Nodes of nodes that left are deleted, the others get the labels and taints they ask for, and CoreDNS's
// replica count follows how many there are (dnsscale.go).
func (w *Workload) nodePass(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, nodes, err := w.adminNodes(ctx)
	if err != nil {
		return
	}
	w.forgetLeftNodes(ctx, c, nodes)
	w.applyNodeSpecs(ctx, c, nodes)
	w.scaleCoreDNS(ctx, c, nodes)
}

// adminNodes lists the cluster's Nodes with a control plane's admin client.
func (w *Workload) adminNodes(ctx context.Context) (*kubeapi.Client, []corev1.Node, error) {
	c, err := w.admin()
	if err != nil {
		return nil, nil, err
	}
	var nodes corev1.NodeList
	if err := c.Get(ctx, "/api/v1/nodes", &nodes); err != nil {
		return nil, nil, err
	}
	return c, nodes.Items, nil
}

// forgetLeftNodes deletes the Node objects of nodes that left.
func (w *Workload) forgetLeftNodes(ctx context.Context, c *kubeapi.Client, nodes []corev1.Node) {
	for _, name := range leftNodes(nodes, w.Now()) {
		if err := c.Delete(ctx, "/api/v1/nodes/"+name); err != nil {
			w.Log.Warn("delete the Node of a node that left", "node", name, "error", err)
			continue
		}
		w.Log.Info("deleted the Node of a node that reset and left the cluster", "node", name)
	}
}

// leftNodes names the nodes that said they left more than leftNodeGrace ago and whose kubelet has gone
// quiet (Ready is no longer True: the node lifecycle controller marks a silent kubelet Unknown). The
// kubelet may still post its status between the mark and its stop, so a heartbeat after the mark proves
// nothing; a node that joins again under the same name has its mark cleared when it is given its ticket
// (ClearLeft).
func leftNodes(nodes []corev1.Node, now time.Time) []string {
	var out []string
	for _, n := range nodes {
		at, err := time.Parse(time.RFC3339, n.Annotations[LeftAnnotation])
		if err != nil || now.Sub(at) < leftNodeGrace || ready(n) {
			continue
		}
		out = append(out, n.Name)
	}
	return out
}

// ready reports whether the node's kubelet last said it is Ready.
func ready(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ClearLeft removes the mark of a node that left from its Node, if the Node is still there: the node is
// joining again under the same name and must not be forgotten once its new kubelet is slow to report.
func (w *Workload) ClearLeft(ctx context.Context, name string) error {
	c, err := w.admin()
	if errors.Is(err, ErrNotRunning) {
		return nil // no Kubernetes, no Node objects (sandbox mode without a payload)
	}
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, LeftAnnotation)
	err = c.Patch(ctx, "/api/v1/nodes/"+url.PathEscape(name), []byte(patch))
	if err != nil && !kubeapi.IsNotFound(err) {
		return fmt.Errorf("clear the left mark of Node %s: %w", name, err)
	}
	return nil
}

// NodeExists reports whether the cluster has a Node of that name (asked with the admin credentials of a
// control plane).
func (w *Workload) NodeExists(ctx context.Context, name string) (bool, error) {
	c, err := w.admin()
	if err != nil {
		return false, err
	}
	var n corev1.Node
	err = c.Get(ctx, "/api/v1/nodes/"+url.PathEscape(name), &n)
	switch {
	case kubeapi.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
