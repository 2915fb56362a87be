package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// The first control plane of a new cluster used to wait for the controller-manager to give its Node a
// PodCIDR before it could write its CNI config and become Ready: on an emulated CPU the
// controller-manager's pod takes 15 to 35 s from its manifest to its node-IPAM controller's first
// allocation, and the node's Ready waited all of it (measured 2026-12-01: the PodCIDR came 34.8 s after
// the pod-network task started, the OpenAPI warm-up beside it was done after 18.2 s).
//
// On that node, during Init, nobody else can allocate: its Node is the cluster's only one, the join
// service starts after the pod network, and the controller-manager's allocator, when it starts, takes
// every PodCIDR a Node already has as occupied. So the node takes for itself the subnet the allocator
// would give the first Node of a cluster: the first subnet of cluster.network.podCIDR (of
// nodeCIDRMaskSize) that does not overlap the service range. The choice and the result are the
// allocator's; only the wait is gone. Anywhere else (a join, a boot, a cluster restored from a snapshot whose Nodes came
// back with it), the controller-manager decides, as before. If it gets there first, the API server
// refuses a second PodCIDR (it may only be set once) and the node takes the allocator's.

// FirstSubnet returns the first subnet of cluster with prefix length bits that does not overlap
// reserved (the service range, which the allocator leaves out of the pod range when they overlap).
func FirstSubnet(cluster netip.Prefix, bits int, reserved netip.Prefix) (netip.Prefix, error) {
	cluster = cluster.Masked()
	addrBits := cluster.Addr().BitLen()
	if bits < cluster.Bits() || bits > addrBits {
		return netip.Prefix{}, fmt.Errorf("node mask /%d does not fit in the pod range %s", bits, cluster)
	}
	if bits-cluster.Bits() > 16 {
		return netip.Prefix{}, fmt.Errorf("node mask /%d is more than 16 bits longer than the pod range %s", bits, cluster)
	}
	count := 1 << (bits - cluster.Bits())
	base := new(big.Int).SetBytes(cluster.Addr().AsSlice())
	step := new(big.Int).Lsh(big.NewInt(1), uint(addrBits-bits))
	for i := range count {
		n := new(big.Int).Add(base, new(big.Int).Mul(step, big.NewInt(int64(i))))
		b := n.FillBytes(make([]byte, addrBits/8))
		addr, _ := netip.AddrFromSlice(b)
		subnet := netip.PrefixFrom(addr, bits)
		if !reserved.IsValid() || !reserved.Overlaps(subnet) {
			return subnet, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("every /%d of the pod range %s overlaps the service range %s", bits, cluster, reserved)
}

// claimFor is the PodCIDR node name takes for itself among nodes (the cluster's Nodes), or "" when it
// must wait for the controller-manager's: it is not the only Node, or it has one already.
func claimFor(nodes []corev1.Node, name string, pods netip.Prefix, bits int, services netip.Prefix) (string, error) {
	if len(nodes) != 1 || nodes[0].Name != name || nodes[0].Spec.PodCIDR != "" {
		return "", nil
	}
	subnet, err := FirstSubnet(pods, bits, services)
	if err != nil {
		return "", fmt.Errorf("cluster.network: %w", err)
	}
	return subnet.String(), nil
}

// claimPodCIDR gives node name its PodCIDR (claimFor) and reports what it set: "" when it set nothing,
// the controller-manager's allocator deciding, or when the allocator was first.
func (w *Workload) claimPodCIDR(ctx context.Context, name string) (string, error) {
	c, err := w.admin()
	if err != nil {
		return "", err
	}
	var nodes corev1.NodeList
	if err := c.Get(ctx, "/api/v1/nodes", &nodes); err != nil {
		return "", fmt.Errorf("list the nodes: %w", err)
	}
	r := w.Renderer()
	subnet, err := claimFor(nodes.Items, name, r.PodCIDR(), r.NodeCIDRMaskSize(), r.ServiceCIDR())
	if subnet == "" || err != nil {
		return "", err
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": subnet, "podCIDRs": []string{subnet}}})
	if err != nil {
		return "", err
	}
	if err := c.Patch(ctx, "/api/v1/nodes/"+name, patch); err != nil {
		if kubeapi.IsInvalid(err) {
			return "", nil // the allocator set one first (it may only be set once): the next look at the Node reads it
		}
		return "", fmt.Errorf("set node %s's PodCIDR: %w", name, err)
	}
	return subnet, nil
}
