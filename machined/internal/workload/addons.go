package workload

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/addons"
	"github.com/cairn-os/cairn/machined/internal/kube"
)

// fieldManager owns every field Cairn applies: `kubectl get -o yaml --show-managed-fields` shows which.
const fieldManager = "cairn"

// vxlanOverhead is what flannel's vxlan encapsulation adds to every packet (IPv4 underlay): the pods'
// MTU must leave room for it or large packets between nodes are dropped.
const vxlanOverhead = 50

// addonOptions are the add-ons' settings for this cluster, from the machine config and the renderer.
func (w *Workload) addonOptions() addons.Options {
	r, c := w.Renderer(), w.config()
	imgs := r.Images()
	hp := addons.DefaultHostPaths(w.Paths)
	if w.Hosts != nil {
		hp.EtcHosts = w.Paths.Join("etc", "hosts") // where discoveryNames keeps api.internal.<cluster>
	}
	return addons.Options{
		APIServer:    r.InternalEndpoint(),
		PodCIDR:      r.PodCIDR(),
		ServiceCIDR:  r.ServiceCIDR(),
		DNSDomain:    r.DNSDomain(),
		DNSServiceIP: r.ClusterDNSIP(),
		Images:       addons.Images{KubeProxy: imgs.KubeProxy, CoreDNS: imgs.CoreDNS, Flannel: imgs.Flannel},
		Proxy:        c.Cluster.Proxy,
		CoreDNS:      c.Cluster.CoreDNS,
		CNI:          c.Cluster.Network.CNIOrDefault(),
		HostPaths:    hp,
	}
}

// applyAddons applies the core add-ons (kube-proxy, CoreDNS, flannel) with server-side apply, on every
// boot of every control plane, so each one is what this version of Cairn renders: a core add-on that
// was deleted comes back, one that was edited gets Cairn's fields back, and fields Cairn does not set
// keep what others made them. An add-on switched off in the config is left alone, never deleted: a
// user who brings their own removes Cairn's (DESIGN.md §12).
func (w *Workload) applyAddons(ctx context.Context) error {
	c, err := w.admin()
	if err != nil {
		return err
	}
	o := w.addonOptions()
	if !o.CoreDNS.Disabled && o.CoreDNS.Replicas == 0 {
		err := untilInvalid(ctx, retryEvery, func(ctx context.Context) error {
			_, nodes, err := w.adminNodes(ctx) // the same admin client as c
			if err != nil {
				return fmt.Errorf("list nodes: %w", err)
			}
			_, o.CoreDNSReplicas, _, err = w.coreDNSReplicas(ctx, c, nodes)
			return err
		})
		if err != nil {
			return fmt.Errorf("CoreDNS's replica count: %w", err)
		}
	}
	objs, err := addons.Render(o)
	if err != nil {
		return err
	}
	start := time.Now()
	for _, o := range objs {
		body, err := o.JSON()
		if err != nil {
			return err
		}
		// The API server may still be settling (a fresh control plane's RBAC and admission caches):
		// retry each object until the task's deadline, but not one it refuses as invalid, which no
		// retry mends.
		err = untilInvalid(ctx, retryEvery, func(ctx context.Context) error { return c.Apply(ctx, o.ItemPath(), body, fieldManager) })
		if err != nil {
			return fmt.Errorf("apply %s: %w", o.ItemPath(), err)
		}
	}
	w.Log.Info("add-ons applied", "objects", len(objs), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// cniOptions shape this node's pod network for the cluster's choice of network.
func (w *Workload) cniOptions() kube.CNIOptions {
	if w.config().Cluster.Network.CNIOrDefault() != config.CNIFlannel {
		return kube.CNIOptions{}
	}
	return kube.CNIOptions{ClusterMasquerade: true, MTU: w.linkMTU() - vxlanOverhead}
}

// linkMTU is the MTU of the interface that holds the node's primary address, the one flannel
// encapsulates over; 1500 when it cannot be told.
func (w *Workload) linkMTU() int {
	primary := w.Renderer().PrimaryIP()
	links, err := net.Interfaces()
	if err != nil {
		return 1500
	}
	for _, l := range links {
		addrs, err := l.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == primary && l.MTU > 0 {
				return l.MTU
			}
		}
	}
	return 1500
}
