package workload

import (
	"cmp"
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

// Members lists the cluster's control-plane nodes and their addresses, from the Node objects and, on a
// control plane, the addresses its etcd members recorded (etcdNames); before either answers, just this
// node when it is one.
func (w *Workload) Members(ctx context.Context) []*machine.Member {
	out := w.currentMembers(ctx).members()
	if len(out) == 0 && w.controlPlane() {
		out = []*machine.Member{w.self()}
	}
	return out
}

// memberAnswers is what the two sources of the members said: the Nodes' control planes and, on a control
// plane, the addresses etcd's members recorded. An error is a source that did not answer.
type memberAnswers struct {
	api      []*machine.Member
	apiErr   error
	recorded map[string]string
	etcdErr  error // nil on a worker, which asks no etcd
}

// answered: at least one source answered.
func (a memberAnswers) answered() bool { return a.apiErr == nil || a.recorded != nil }

// members are both answers together (etcd's address for a member both know).
func (a memberAnswers) members() []*machine.Member { return withEtcdNames(a.api, a.recorded) }

// over lays the answers over the members known before: only a refresh that every source answered may
// take a member away. One source alone does not know them all (a joining control plane is in etcd's
// records before it has a Node), and make e2e-ha saw what a partial answer does: the first control
// plane's etcd, too busy to answer within memberQueryTimeout while a third control plane joined, left the
// API's two Nodes as the whole cluster, the learner's name went from /etc/hosts, and that etcd member could
// no longer reach the learner to send it its snapshot.
func (a memberAnswers) over(known []*machine.Member) []*machine.Member {
	if a.apiErr != nil || a.etcdErr != nil {
		return withMembers(known, a.members())
	}
	return a.members()
}

// currentMembers asks both sources, each with a time limit of its own, so an API that does not answer
// (a control plane booting, its VIP moving) leaves time for etcd.
func (w *Workload) currentMembers(ctx context.Context) memberAnswers {
	var a memberAnswers
	actx, cancel := context.WithTimeout(ctx, memberQueryTimeout)
	a.api, a.apiErr = w.apiMembers(actx)
	cancel()
	ectx, cancel := context.WithTimeout(ctx, memberQueryTimeout)
	defer cancel()
	a.recorded, a.etcdErr = w.etcdNames(ectx)
	return a
}

// memberQueryTimeout bounds each of currentMembers' questions.
const memberQueryTimeout = 8 * time.Second

// etcdNames are the addresses the cluster's etcd members recorded (etcdops.Names), on a control plane;
// nil and no error elsewhere.
func (w *Workload) etcdNames(ctx context.Context) (map[string]string, error) {
	if !w.controlPlane() || w.Renderer() == nil {
		return nil, nil
	}
	names, err := w.etcdOps().Names(ctx)
	if err != nil {
		return nil, err
	}
	return names, nil
}

// knownMembers are the members last published.
func (w *Workload) knownMembers() []*machine.Member {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.members)
}

// withEtcdNames adds the members etcd knows by name to members, and takes etcd's address for those both
// know: a member records its address as soon as its etcd is healthy, before its kubelet reports it in
// the Node, and a joining control plane is in etcd before it has a Node at all.
func withEtcdNames(members []*machine.Member, names map[string]string) []*machine.Member {
	var recorded []*machine.Member
	for _, name := range slices.Sorted(maps.Keys(names)) {
		recorded = append(recorded, &machine.Member{Name: name, Address: names[name], ControlPlane: true})
	}
	return withMembers(members, recorded)
}

// withMembers is members with newer's in place of those of the same name and the others added, sorted by
// name.
func withMembers(members, newer []*machine.Member) []*machine.Member {
	out := slices.Clone(members)
	for _, m := range newer {
		if i := slices.IndexFunc(out, func(x *machine.Member) bool { return x.Name == m.Name }); i >= 0 {
			out[i] = m
		} else {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// recordEtcdName records this control plane's address under its name in etcd (etcdops.Names) once its
// member is healthy, at every boot: the other control planes reach its member by name, and a node whose
// address changed is found at its new one.
func (w *Workload) recordEtcdName(ctx context.Context) error {
	if w.Hosts == nil {
		return nil // sandbox mode: members are reached by address
	}
	self := w.self()
	if err := w.etcdOps().PutName(ctx, self.Name, self.Address); err != nil {
		return err
	}
	w.publishEtcdNames(ctx)
	return nil
}

// publishEtcdNames publishes the members etcd has records of over those this node knew: at once, without
// asking the API, which a booting control plane does not serve yet (a refresh through it waited for its
// timeout there) and which has no Node yet for a member that is joining.
func (w *Workload) publishEtcdNames(ctx context.Context) {
	if names, _ := w.etcdNames(ctx); len(names) > 0 {
		w.publishNames(withEtcdNames(w.knownMembers(), names))
	}
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
// Before the API or etcd answers, the members are the join ticket's (a joined node: the control planes
// that were there when it joined) and this node when it is a control plane.
func (w *Workload) discoveryNames(ctx context.Context) error {
	if w.Hosts == nil {
		return nil
	}
	saved := w.savedMembers()
	var members []*machine.Member
	if a := w.currentMembers(ctx); a.answered() {
		members = a.over(saved) // one source alone: what it knows over what this node knew
	}
	if len(members) == 0 {
		if t, err := w.ticket(); err == nil {
			members = append(members, t.Members...)
		}
		// What this node knew at its last boot is newer than its ticket.
		members = withMembers(members, saved)
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
	self := ""
	if w.controlPlane() && w.Renderer() != nil {
		// This node knows its own address best: the API's and etcd's records of it may be from before
		// it changed.
		me := w.self()
		self = me.Name
		members = append(slices.DeleteFunc(slices.Clone(members), func(m *machine.Member) bool { return m.Name == self }), me)
	}
	names := Names(c.Cluster.Name, c.Cluster.VIP, self, members)
	w.mu.Lock()
	changed := !maps.EqualFunc(w.names, names, slices.Equal)
	w.names, w.members = names, members
	w.mu.Unlock()
	w.Hosts(names)
	if changed {
		w.saveMembers(members)
		w.Log.Info("discovery names", "names", describeNames(names))
		if w.NamesEvent != nil {
			w.NamesEvent(describeNames(names))
		}
	}
}

// Names are the discovery names for a cluster's control-plane members and its virtual IP (empty: none).
// On a control plane (self: its node name) etcd.internal.<cluster> names every member too, its own
// address first: its API server's etcd endpoint (kube.Renderer.EtcdName).
func Names(cluster, vip, self string, members []*machine.Member) map[string][]netip.Addr {
	api := "api.internal." + cluster
	names := map[string][]netip.Addr{}
	if self != "" {
		etcd := "etcd.internal." + cluster
		for _, m := range slices.SortedStableFunc(slices.Values(members), func(a, b *machine.Member) int {
			return cmp.Compare(b2i(a.Name != self), b2i(b.Name != self))
		}) {
			if a, err := netip.ParseAddr(m.Address); err == nil && m.Name != "" && !slices.Contains(names[etcd], a) {
				names[etcd] = append(names[etcd], a)
			}
		}
	}
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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
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
