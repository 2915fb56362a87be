package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/addons"
	"github.com/cairn-os/cairn/machined/internal/health"
)

// addonProbes are the add-ons' part of Health. On a control plane: kube-proxy (and flannel) ready on
// every node, CoreDNS's replicas ready. On every node: the kubernetes Service's name looked up through
// the kube-dns Service from this node. That answer went through kube-proxy's rules on this node to a
// CoreDNS pod, which knows the name only because it reached the API server through the kubernetes
// Service from inside the pod network: one check for the Service path, DNS and a pod's way to the API.
func (w *Workload) addonProbes() []health.Probe {
	c := w.config()
	var probes []health.Probe
	proxy := !c.Cluster.Proxy.Disabled
	flannel := c.Cluster.Network.CNIOrDefault() == config.CNIFlannel
	if w.controlPlane() {
		if proxy {
			probes = append(probes, health.Probe{Name: "kube-proxy", Run: func(ctx context.Context) (string, error) {
				return w.daemonSetReady(ctx, addons.KubeProxyDaemonSet)
			}})
		}
		if flannel {
			probes = append(probes, health.Probe{Name: "flannel", Run: func(ctx context.Context) (string, error) {
				return w.daemonSetReady(ctx, addons.FlannelDaemonSet)
			}})
		}
		if !c.Cluster.CoreDNS.Disabled {
			probes = append(probes, health.Probe{Name: "coredns", Run: func(ctx context.Context) (string, error) {
				return w.deploymentReady(ctx, addons.CoreDNSDeployment)
			}})
		}
	} else {
		for _, a := range []struct {
			on    bool
			name  string
			label string
		}{{proxy, "kube-proxy", addons.KubeProxySelector}, {flannel, "flannel", addons.FlannelSelector}} {
			if a.on {
				probes = append(probes, health.Probe{Name: a.name, Run: func(ctx context.Context) (string, error) {
					return w.ownPodReady(ctx, a.label)
				}})
			}
		}
	}
	if proxy && !c.Cluster.CoreDNS.Disabled {
		probes = append(probes, health.Probe{Name: "service-dns", Run: w.serviceDNS})
	}
	return probes
}

func (w *Workload) daemonSetReady(ctx context.Context, name string) (string, error) {
	c, err := w.admin()
	if err != nil {
		return "", err
	}
	var ds appsv1.DaemonSet
	if err := c.Get(ctx, "/apis/apps/v1/namespaces/kube-system/daemonsets/"+name, &ds); err != nil {
		return "", err
	}
	want, ready := ds.Status.DesiredNumberScheduled, ds.Status.NumberReady
	if want == 0 || ready < want {
		return "", fmt.Errorf("ready on %d of %d nodes (DaemonSet %s)", ready, want, name)
	}
	return fmt.Sprintf("ready on %d of %d nodes", ready, want), nil
}

func (w *Workload) deploymentReady(ctx context.Context, name string) (string, error) {
	c, err := w.admin()
	if err != nil {
		return "", err
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, "/apis/apps/v1/namespaces/kube-system/deployments/"+name, &d); err != nil {
		return "", err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ReadyReplicas < want {
		return "", fmt.Errorf("%d of %d replicas ready (Deployment %s)", d.Status.ReadyReplicas, want, name)
	}
	return fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, want), nil
}

// ownPodReady checks the add-on's pod on this node, with the node's own credential (a worker holds no
// other): the node authorizer lets a node list the pods bound to it.
func (w *Workload) ownPodReady(ctx context.Context, label string) (string, error) {
	c, err := w.nodeClient()
	if err != nil {
		return "", err
	}
	name, _ := w.Identity()
	q := url.Values{"fieldSelector": {"spec.nodeName=" + name}, "labelSelector": {label}}
	var pods corev1.PodList
	if err := c.Get(ctx, "/api/v1/namespaces/kube-system/pods?"+q.Encode(), &pods); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if podReady([]corev1.Pod{p}, p.Name) {
			return p.Name + " ready", nil
		}
	}
	return "", fmt.Errorf("no ready pod with %s on %s (%d found)", label, name, len(pods.Items))
}

// serviceDNS looks up kubernetes.default through the kube-dns Service from this node and expects the
// kubernetes Service's address.
func (w *Workload) serviceDNS(ctx context.Context) (string, error) {
	r := w.Renderer()
	dns := net.JoinHostPort(r.ClusterDNSIP().String(), "53")
	// Until kube-proxy has written its rules, nothing on this node translates the kube-dns address and the
	// query would leave by the default route, asking the node's network for the cluster's names.
	if err := kubeProxySynced(ctx, r.ClusterDNSIP().Is6()); err != nil {
		return "", fmt.Errorf("not looked up through kube-dns %s yet: %w", dns, err)
	}
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dns)
	}}
	name := "kubernetes.default.svc." + r.DNSDomain() + "."
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := res.LookupHost(lctx, name)
	if err != nil {
		// The resolver's error names the server of /etc/resolv.conf, not the one dialled.
		dropped := droppedHere(err)
		var de *net.DNSError
		if errors.As(err, &de) {
			err = errors.New(de.Err)
		}
		if dropped {
			return "", fmt.Errorf("look up %s through kube-dns %s: %w: %s", name, dns, err, droppedHint)
		}
		return "", fmt.Errorf("look up %s through kube-dns %s: %w", name, dns, err)
	}
	want := r.APIServerServiceIP().String()
	if !slices.Contains(addrs, want) {
		return "", fmt.Errorf("%s resolved to %s through kube-dns %s, want the kubernetes Service's %s", name, strings.Join(addrs, ", "), dns, want)
	}
	return fmt.Sprintf("%s → %s through kube-dns %s", strings.TrimSuffix(name, "."), want, dns), nil
}

// droppedHint says what a query refused on its way out of this node means. kube-proxy's nftables rules
// reject a packet to a Service address that they do not translate (an address or port they do not know,
// or a Service they think has no endpoints), and a packet a rule drops on its way out fails its send
// with EPERM: so the query never left. While CoreDNS starts that is expected (kube-proxy knows no ready
// endpoint yet); when it lasts, what to look at is this node's kube-proxy.
const droppedHint = "this node's netfilter refused the query before it left: kube-proxy here has no translation " +
	"for the kube-dns Service, no ready CoreDNS endpoint or no rule for its address (see the coredns check, " +
	"kube-proxy's pod log on this node, and `nft list ruleset` run in that pod)"

// droppedHere tells a send this node's netfilter refused (EPERM) from any other failure of a lookup.
func droppedHere(err error) bool {
	return errors.Is(err, syscall.EPERM) || strings.Contains(err.Error(), syscall.EPERM.Error())
}

// kubeProxySynced asks this node's kube-proxy whether it has written its rules for the IP family.
func kubeProxySynced(ctx context.Context, ipv6 bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addons.KubeProxyHealthz, nil)
	if err != nil {
		return err
	}
	// Straight to this node's kube-proxy, never through an HTTP proxy of the environment.
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("kube-proxy on this node does not answer: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("kube-proxy's %s: %w", addons.KubeProxyHealthz, err)
	}
	family := corev1.IPv4Protocol
	if ipv6 {
		family = corev1.IPv6Protocol
	}
	return proxyRulesWritten(body, family)
}

// proxyRulesWritten reads kube-proxy's /healthz answer. It says healthy while kube-proxy starts too, and
// lists an IP family under "status" only once it has written that family's rules; whether it is late with
// an update since (503) does not matter here: its rules for the Services it knows are in place.
func proxyRulesWritten(body []byte, family corev1.IPFamily) error {
	var h struct {
		Status map[corev1.IPFamily]struct {
			LastUpdated time.Time `json:"lastUpdated"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("kube-proxy's %s answer: %w", addons.KubeProxyHealthz, err)
	}
	if st, ok := h.Status[family]; !ok || st.LastUpdated.IsZero() {
		return fmt.Errorf("kube-proxy on this node has not written its %s rules", family)
	}
	return nil
}
