package workload

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

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
	out, err := w.apiMembers(ctx)
	if (err != nil || len(out) == 0) && w.controlPlane() {
		out = []*machine.Member{w.self()}
	}
	return out
}

// apiMembers lists the control-plane Nodes and their InternalIPs, sorted by name.
func (w *Workload) apiMembers(ctx context.Context) ([]*machine.Member, error) {
	c, err := w.nodeClient()
	if err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	if err := c.Get(ctx, "/api/v1/nodes?labelSelector="+controlPlaneLabel, &nodes); err != nil {
		return nil, err
	}
	var out []*machine.Member
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				out = append(out, &machine.Member{Name: n.Name, Address: a.Address, ControlPlane: true})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (w *Workload) self() *machine.Member {
	name, _ := w.Identity()
	return &machine.Member{Name: name, Address: w.Renderer().PrimaryIP().String(), ControlPlane: true}
}

// discoveryNames keeps /etc/hosts names for the API endpoint (api.internal.<cluster>) and each
// control-plane member current from the cluster's membership: protokube's DNS job, with no DNS provider.
// This task publishes them at boot, before the kubelet starts (a worker's kubelet and every node's
// kube-proxy and flannel reach the API by the name); WhileRunning refreshes them from the API.
// Before the API answers, the members are the join ticket's (a joined node: the control planes that
// were there when it joined) and this node when it is a control plane.
func (w *Workload) discoveryNames(ctx context.Context) error {
	if w.Hosts == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	members, err := w.apiMembers(ctx)
	if err != nil || len(members) == 0 {
		members = nil
		if t, err := w.ticket(); err == nil {
			members = append(members, t.Members...)
		}
		if w.controlPlane() {
			self := w.self()
			members = slices.DeleteFunc(members, func(m *machine.Member) bool { return m.Name == self.Name })
			members = append(members, self)
		}
	}
	w.publishNames(members)
	return nil // WhileRunning keeps them current from here on
}

// publishNames writes the names: each control plane's by its own address, and api.internal.<cluster>
// by the cluster's virtual IP when it has one (the VIP moves to a live control plane within seconds,
// without waiting for this node's next refresh), else by every control plane's address (a client
// that cannot connect to one tries the next).
func (w *Workload) publishNames(members []*machine.Member) {
	c := w.config()
	if c == nil {
		return
	}
	names := Names(c.Cluster.Name, c.Cluster.VIP, members)
	w.mu.Lock()
	changed := !maps.EqualFunc(w.names, names, slices.Equal)
	w.names = names
	w.mu.Unlock()
	w.Hosts(names)
	if changed {
		w.Log.Info("discovery names", "names", describeNames(names))
		if w.NamesEvent != nil {
			w.NamesEvent(describeNames(names))
		}
	}
}

// Names are the discovery names for a cluster's control-plane members and its virtual IP (empty: none).
func Names(cluster, vip string, members []*machine.Member) map[string][]netip.Addr {
	api := "api.internal." + cluster
	names := map[string][]netip.Addr{}
	for _, m := range members {
		a, err := netip.ParseAddr(m.Address)
		if err != nil || m.Name == "" {
			continue
		}
		if !slices.Contains(names[m.Name], a) {
			names[m.Name] = append(names[m.Name], a)
		}
		if !slices.Contains(names[api], a) {
			names[api] = append(names[api], a)
		}
	}
	if v, err := netip.ParseAddr(vip); err == nil {
		names[api] = []netip.Addr{v.Unmap()}
	}
	return names
}

// describeNames is the names as one line, sorted: "api.internal.demo=10.5.0.2,10.5.0.3 cp-1=10.5.0.2".
func describeNames(names map[string][]netip.Addr) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		var as []string
		for _, a := range names[n] {
			as = append(as, a.String())
		}
		parts = append(parts, n+"="+strings.Join(as, ","))
	}
	return strings.Join(parts, " ")
}
