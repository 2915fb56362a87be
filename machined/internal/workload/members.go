package workload

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// controlPlaneLabel marks control-plane nodes (set by machined on each of them).
const controlPlaneLabel = "node-role.kubernetes.io/control-plane"

// client is this node's client of the cluster: the admin on a control plane, the kubelet's own
// credential on a worker (it may read nodes).
func (w *Workload) nodeClient() (*kubeapi.Client, error) {
	if w.controlPlane() {
		return w.admin()
	}
	r := w.Renderer()
	if r == nil {
		return nil, ErrNotRunning
	}
	kc := r.Layout().KubernetesFile(kube.KubeletConf)
	if _, err := os.Stat(kc); err != nil {
		return nil, fmt.Errorf("the kubelet has no credential yet (%s): its bootstrap CSR is not approved yet", kc)
	}
	return w.kubeClients.FromKubeconfig(kc, "")
}

func (w *Workload) controlPlane() bool {
	c := w.config()
	return c != nil && c.Machine.Type == config.TypeControlPlane
}

// Members lists the cluster's control-plane nodes and their addresses, from the Node objects; before the
// API answers, just this node when it is one.
func (w *Workload) Members(ctx context.Context) []*machine.Member {
	var out []*machine.Member
	if c, err := w.nodeClient(); err == nil {
		var nodes corev1.NodeList
		if err := c.Get(ctx, "/api/v1/nodes?labelSelector="+controlPlaneLabel, &nodes); err == nil {
			for _, n := range nodes.Items {
				for _, a := range n.Status.Addresses {
					if a.Type == corev1.NodeInternalIP {
						out = append(out, &machine.Member{Name: n.Name, Address: a.Address, ControlPlane: true})
						break
					}
				}
			}
		}
	}
	if len(out) == 0 && w.controlPlane() {
		name, _ := w.Identity()
		out = append(out, &machine.Member{Name: name, Address: w.Renderer().PrimaryIP().String(), ControlPlane: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// discoveryNames keeps /etc/hosts names for the API endpoint (api.internal.<cluster>) and each
// control-plane member current from the cluster's membership: protokube's DNS job, with no DNS provider.
// This task publishes them at boot; WhileRunning refreshes them.
func (w *Workload) discoveryNames(ctx context.Context) error {
	if w.Hosts == nil {
		return nil
	}
	members := w.Members(ctx)
	if len(members) == 0 {
		if t, err := w.ticket(); err == nil {
			members = t.Members
		}
	}
	w.publishNames(members)
	return nil // WhileRunning keeps them current from here on
}

func (w *Workload) publishNames(members []*machine.Member) {
	c := w.config()
	if c == nil {
		return
	}
	names := map[string][]netip.Addr{}
	for _, m := range members {
		a, err := netip.ParseAddr(m.Address)
		if err != nil {
			continue
		}
		names[m.Name] = append(names[m.Name], a)
		names["api.internal."+c.Cluster.Name] = append(names["api.internal."+c.Cluster.Name], a)
	}
	w.Hosts(names)
}
