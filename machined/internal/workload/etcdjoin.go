package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/etcdops"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// The etcd half of control-plane joins: the issuing node adds the joining one as a learner, the joining
// node starts its member into the existing cluster and promotes it once it has caught up; a control plane
// that resets removes its member, so the cluster's quorum counts only nodes that are there.

// etcdOps is an etcd client with this node's health-check certificate, for its own member or, given
// endpoints, for another node's cluster.
func (w *Workload) etcdOps(endpoints ...string) *etcdops.Client {
	l := w.Renderer().Layout()
	return &etcdops.Client{Endpoints: endpoints, CACert: l.PKIFile(kube.EtcdCACert),
		Cert: l.PKIFile(kube.EtcdHealthcheckCert), Key: l.PKIFile(kube.EtcdHealthcheckKey)}
}

// AddLearner implements joinsvc.EtcdMembership on a Running control plane.
func (w *Workload) AddLearner(ctx context.Context, name, address string) (uint64, []*machine.EtcdPeer, error) {
	if w.Renderer() == nil || !w.controlPlane() {
		return 0, nil, ErrNotRunning
	}
	// The learner is reached by its name when the cluster keeps discovery names: every member must
	// resolve it before it has a Node, so its address is recorded in etcd first; every control plane reads
	// the records of members into its /etc/hosts, this one as soon as the learner is one.
	peerURL := kube.EtcdPeerURL(address)
	if w.Hosts != nil {
		peerURL = kube.EtcdPeerURL(name)
		if err := w.etcdOps().PutName(ctx, name, address); err != nil {
			return 0, nil, err
		}
	}
	id, peers, err := w.etcdOps().AddLearner(ctx, name, peerURL)
	if err != nil {
		return 0, nil, err
	}
	if w.Hosts != nil {
		w.publishEtcdNames(ctx)
	}
	out := make([]*machine.EtcdPeer, 0, len(peers))
	for _, p := range peers {
		switch {
		case p.ID == id:
			out = append(out, &machine.EtcdPeer{Name: name, PeerUrl: p.PeerURL})
		case p.Name == "":
			return 0, nil, fmt.Errorf("etcd member %x at %s was added but never started (an earlier join that failed?): "+
				"it must start or be removed before another member can join", p.ID, p.PeerURL)
		default:
			out = append(out, &machine.EtcdPeer{Name: p.Name, PeerUrl: p.PeerURL, ClientUrl: p.ClientURL})
		}
	}
	w.Log.Info("etcd learner added for a joining control plane", "node", name, "peer", peerURL, "id", fmt.Sprintf("%x", id))
	return id, out, nil
}

// joinedEtcd is the etcd cluster a joined control plane's ticket names (nil: this node started it).
func (w *Workload) joinedEtcd() *machine.ControlPlaneSecrets {
	if w.Ticket == nil {
		return nil
	}
	t, err := w.Ticket()
	if err != nil || t.Role != config.TypeControlPlane || t.ControlPlane == nil || len(t.ControlPlane.EtcdMembers) == 0 {
		return nil
	}
	return t.ControlPlane
}

// etcdOptions start this node's member in the cluster its ticket names, or in a new one.
func (w *Workload) etcdOptions() kube.EtcdOptions {
	var o kube.EtcdOptions
	if cp := w.joinedEtcd(); cp != nil {
		for _, m := range cp.EtcdMembers {
			o.Existing = append(o.Existing, kube.EtcdMember{Name: m.Name, PeerURL: m.PeerUrl})
		}
	}
	return o
}

// promoteEtcd makes this node's learner a voting member once it has caught up, through the members the
// ticket names (a learner cannot promote itself through its own endpoint). A member that votes already
// (a resumed Join) passes at once.
func (w *Workload) promoteEtcd(ctx context.Context) error {
	cp := w.joinedEtcd()
	if cp == nil {
		return errors.New("the join ticket names no etcd cluster to join")
	}
	var endpoints []string
	for _, m := range cp.EtcdMembers {
		if m.ClientUrl != "" {
			endpoints = append(endpoints, m.ClientUrl)
		}
	}
	c := w.etcdOps(endpoints...)
	start := time.Now()
	err := kubeapi.Poll(ctx, 2*time.Second, func(ctx context.Context) error { return c.Promote(ctx, cp.EtcdMemberId) })
	if err == nil {
		w.Log.Info("etcd member promoted to voter", "id", fmt.Sprintf("%x", cp.EtcdMemberId), "after", time.Since(start).Round(time.Second))
	}
	return err
}

// leaveEtcd removes this control plane's etcd member before a reset, unless it is the last one. It asks
// the other members, which still answer once this one is out (so a retry after a lost reply finds it
// gone), and retries while etcd refuses, as it does for a few seconds after a member (re)connects.
func (w *Workload) leaveEtcd(ctx context.Context) error {
	// This member's peer URL is by name, or by address when an earlier Cairn started it.
	self := w.Renderer().EtcdPeerURLs()
	members, err := w.etcdOps().Members(ctx)
	if err != nil {
		return err
	}
	// The others by their client URLs (by name), then by the addresses they recorded: a leave must not
	// depend on this node's /etc/hosts being current.
	recorded, _ := w.etcdNames(ctx) // none: by the client URLs alone
	var others []string
	for _, m := range members {
		if !slices.ContainsFunc(m.PeerURLs, func(u string) bool { return slices.Contains(self, u) }) {
			others = append(others, m.ClientURLs...)
			if a, ok := recorded[m.Name]; ok {
				others = append(others, kube.EtcdClientURLAt(a))
			}
		}
	}
	if len(others) == 0 {
		return nil // the last member: the reset takes the cluster's etcd with it
	}
	c := w.etcdOps(others...)
	return kubeapi.Poll(ctx, 2*time.Second, func(ctx context.Context) error {
		removed, err := c.Leave(ctx, self...)
		if err == nil && removed {
			w.Log.Info("left the etcd cluster", "peer", self[0])
		}
		return err
	})
}
