package workload

import (
	"context"
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

// forgetLeftNodes deletes the Node objects of nodes that left (a control plane's Running work).
func (w *Workload) forgetLeftNodes(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := w.admin()
	if err != nil {
		return
	}
	var nodes corev1.NodeList
	if err := c.Get(ctx, "/api/v1/nodes", &nodes); err != nil {
		return
	}
	for _, name := range leftNodes(nodes.Items, w.Now()) {
		if err := c.Delete(ctx, "/api/v1/nodes/"+name); err != nil {
			w.Log.Warn("delete the Node of a node that left", "node", name, "error", err)
			continue
		}
		w.Log.Info("deleted the Node of a node that reset and left the cluster", "node", name)
	}
}

// leftNodes names the nodes that said they left more than leftNodeGrace ago and whose kubelet has not
// reported since: a node that reset and joined again under the same name reports again and is kept.
func leftNodes(nodes []corev1.Node, now time.Time) []string {
	var out []string
	for _, n := range nodes {
		at, err := time.Parse(time.RFC3339, n.Annotations[LeftAnnotation])
		if err != nil || now.Sub(at) < leftNodeGrace {
			continue
		}
		if heartbeat(n).After(at) {
			continue
		}
		out = append(out, n.Name)
	}
	return out
}

// heartbeat is the last time the node's kubelet reported its Ready condition.
func heartbeat(n corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
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
