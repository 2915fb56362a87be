package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// admin is a client for this node's own API server, as the cluster admin.
func (w *Workload) admin() (*kubeapi.Client, error) {
	r := w.Renderer()
	if r == nil {
		return nil, ErrNotRunning // a node without Kubernetes (sandbox mode without a payload)
	}
	return w.kubeClients.FromKubeconfig(r.Layout().KubernetesFile(kube.AdminConf), "https://127.0.0.1:6443")
}

// KubeAPI is a client for this control plane's own API server, as the cluster admin (the join tokens'
// store).
func (w *Workload) KubeAPI() (*kubeapi.Client, error) {
	if w.Renderer() == nil || !w.controlPlane() {
		return nil, errors.New("this node runs no Kubernetes API server (yet)")
	}
	return w.admin()
}

// etcdClient is the client of etcd's /health, as the kubeadm health-check client; one kept-alive connection
// while its certificate is unchanged (kubeClients).
func (w *Workload) etcdClient() (*kubeapi.Client, error) {
	l := w.Renderer().Layout()
	read := func(name string) []byte { b, _ := os.ReadFile(l.PKIFile(name)); return b }
	return w.kubeClients.FromPEM("https://127.0.0.1:2379", read(kube.EtcdCACert), read(kube.EtcdHealthcheckCert), read(kube.EtcdHealthcheckKey))
}

// EtcdHealthy checks etcd's /health as the kubeadm health-check client does.
func (w *Workload) EtcdHealthy(ctx context.Context) error {
	c, err := w.etcdClient()
	if err != nil {
		return err
	}
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := c.Get(ctx, "/health", &h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("etcd reports health %q %s", h.Health, h.Reason)
	}
	return nil
}

// APIServerReady checks /readyz.
func (w *Workload) APIServerReady(ctx context.Context) error {
	c, err := w.admin()
	if err != nil {
		return err
	}
	return c.Get(ctx, "/readyz", nil)
}

// startPoll is the longest pause of Init's waits for etcd, the API server and the node (kubeapi.Poll
// starts at 100 ms and doubles up to it). Each waits for a start that takes seconds natively and tens of
// seconds under emulation, and the pause is what it adds to Init once the start is over. Four sandbox
// Inits each way, alternating: with 2 s, etcd-healthy took 2.0 s, apiserver-ready 2.5-4.9 s, node-ready
// 2.0 s and Init 7.1-9.8 s to Running; with 500 ms, 1.3-2.0, 2.7-3.2, 0.1 and 5.3-6.1 s. (Doubling up to
// 2 s made apiserver-ready 4.0-4.3 s: the try after the API server got ready came up to 1.6 s late.) A
// try costs the API server a /readyz run, 15-20 ms of CPU under emulation, where it asks itself ten
// times a second while it starts.
const startPoll = 500 * time.Millisecond

func (w *Workload) waitEtcd(ctx context.Context) error {
	return kubeapi.Poll(ctx, startPoll, w.EtcdHealthy)
}

func (w *Workload) waitAPIServer(ctx context.Context) error {
	return kubeapi.Poll(ctx, startPoll, w.APIServerReady)
}

// publishBootstrap creates what nodes need to join with a bootstrap token (idempotent).
func (w *Workload) publishBootstrap(ctx context.Context) error {
	c, err := w.admin()
	if err != nil {
		return err
	}
	objs, err := w.Renderer().BootstrapObjects(kube.BootstrapOptions{})
	if err != nil {
		return err
	}
	for _, o := range objs {
		body, err := o.JSON()
		if err != nil {
			return err
		}
		// As for the add-ons: an API server that answers slowly (a control plane restarting beside busy
		// peers) is asked again until the task's deadline; only an invalid object fails at once.
		if err := untilInvalid(ctx, retryEvery, func(ctx context.Context) error { return c.Create(ctx, o.Path, body) }); err != nil {
			return fmt.Errorf("create %s: %w", o.ItemPath(), err)
		}
	}
	return nil
}

// Node reads this node's Node object.
func (w *Workload) Node(ctx context.Context) (*corev1.Node, error) {
	c, err := w.nodeClient()
	if err != nil {
		return nil, err
	}
	name, _ := w.Identity()
	var n corev1.Node
	if err := c.Get(ctx, "/api/v1/nodes/"+name, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// podNetwork waits for the controller-manager to give the node its PodCIDR, then writes the CNI bridge
// config for it (kops' cbr0), so the node becomes Ready without waiting for a network add-on. With
// flannel (the default), the same bridge carries the pods and flanneld routes every other node's
// PodCIDR over vxlan: flannel's own CNI plugin would write exactly this bridge on exactly this subnet
// (its lease is the node's PodCIDR with --kube-subnet-mgr).
//
// claim is for the first control plane's Init: with it the node gives itself its PodCIDR when it is the
// cluster's only Node (podcidr.go) instead of waiting for the controller-manager's allocator.
func (w *Workload) podNetwork(claim bool) func(context.Context) error {
	return func(ctx context.Context) error { return w.waitPodNetwork(ctx, claim) }
}

func (w *Workload) waitPodNetwork(ctx context.Context, claim bool) error {
	var cidr string
	err := kubeapi.Poll(ctx, 2*time.Second, func(ctx context.Context) error {
		n, err := w.Node(ctx)
		if err != nil {
			return err
		}
		if n.Spec.PodCIDR == "" && claim {
			set, err := w.claimPodCIDR(ctx, n.Name)
			if err != nil {
				return err
			}
			if set != "" {
				w.Log.Info("pod network: this node is the cluster's first: it takes the PodCIDR the controller-manager would give it",
					"podCIDR", set)
				n.Spec.PodCIDR = set
			}
		}
		if n.Spec.PodCIDR == "" {
			return fmt.Errorf("node %s has no PodCIDR yet", n.Name)
		}
		cidr = n.Spec.PodCIDR
		return nil
	})
	if err != nil {
		return err
	}
	// The kubelet may not label its own node with a role; the admin can.
	if c, err := w.admin(); err == nil && w.controlPlane() {
		name, _ := w.Identity()
		patch := []byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`)
		if err := c.Patch(ctx, "/api/v1/nodes/"+name, patch); err != nil {
			w.Log.Warn("label the node as a control plane", "error", err)
		}
	}
	network := w.config().Cluster.Network.CNIOrDefault()
	if network == config.CNINone {
		w.Log.Info("pod network: cluster.network.cni is none; the node is Ready once a network add-on writes its CNI config", "podCIDR", cidr)
		return nil
	}
	f, err := w.Renderer().CNIConfig(cidr, w.cniOptions())
	if err != nil {
		return err
	}
	w.Log.Info("pod network", "podCIDR", cidr, "network", network)
	return kube.WriteFiles(kube.Files{f})
}

// NodeReady reports whether the node's Ready condition is True.
func (w *Workload) NodeReady(ctx context.Context) error {
	n, err := w.Node(ctx)
	if err != nil {
		return err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s is not Ready: %s", n.Name, c.Message)
		}
	}
	return fmt.Errorf("node %s reports no Ready condition yet", n.Name)
}

func (w *Workload) waitNodeReady(ctx context.Context) error {
	return kubeapi.Poll(ctx, startPoll, w.NodeReady)
}
