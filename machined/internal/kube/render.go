// Package kube renders everything a Kubernetes node needs from the node's machine config and identity:
// the cluster PKI in kubeadm's layout, kubeconfigs, the static pod manifests of the control plane, the
// kubelet's config, flags and container spec, containerd's config, the CNI bridge config and the
// objects that let other nodes bootstrap.
//
// Rendering is pure: it reads no files and starts nothing, so every output is checked by unit tests
// (golden files). The only I/O is WriteFiles, which the caller uses to put a rendered set on disk.
//
// Two kinds of path appear in the outputs. Host paths (hostPath volumes, the kubelet's and containerd's
// files, mount sources) go through paths.Paths, so sandbox mode (machined --root DIR) renders the same
// tree under DIR. Paths inside a static pod's containers (a component's --flag=/etc/kubernetes/pki/...)
// are the component's own view and stay fixed. The kubelet container sees host paths at the same place
// as the host (identity mounts), because it hands them to containerd, which resolves them on the host.
package kube

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/paths"
)

// APIServerPort is where kube-apiserver listens on every control-plane node, whatever port the cluster
// endpoint (perhaps a load balancer) uses.
const APIServerPort = 6443

// Node is this node's identity as Kubernetes sees it.
type Node struct {
	// Name is the node name (the kubelet's --hostname-override, etcd's member name).
	Name string
	// IPs are the node's addresses. The first is the primary one (kube-apiserver's advertise address,
	// etcd's peer address, the kubelet's --node-ip) unless machine.kubelet.nodeIP names another.
	IPs []netip.Addr
	// DiscoveryNames: machined keeps api.internal.<cluster>, each control plane's node name and (on
	// control planes) etcd.internal.<cluster> in this node's /etc/hosts (and every other node's), so
	// workers' kubelets and the host-network add-ons reach the API by name, etcd members reach each other
	// by node name and the API servers reach etcd by name. False in sandbox mode, where /etc/hosts is the
	// host's: they use the cluster endpoint and addresses.
	DiscoveryNames bool
}

// Images are the container images the node runs; all are in the bundle, none is ever pulled.
type Images struct {
	APIServer         string
	ControllerManager string
	Scheduler         string
	Etcd              string
	Pause             string
	Kubelet           string
	// The core add-ons' images (DESIGN.md §12).
	KubeProxy string
	CoreDNS   string
	Flannel   string
}

// DefaultImages are the images image/bundle/versions.env pins (see _out/bundle/images.txt).
func DefaultImages() Images {
	v := config.KubernetesVersion
	return Images{
		APIServer:         "registry.k8s.io/kube-apiserver:" + v,
		ControllerManager: "registry.k8s.io/kube-controller-manager:" + v,
		Scheduler:         "registry.k8s.io/kube-scheduler:" + v,
		Etcd:              "registry.k8s.io/etcd:" + strings.TrimPrefix(config.EtcdVersion, "v") + "-0",
		Pause:             "registry.k8s.io/pause:" + config.PauseTag,
		Kubelet:           "cairn.local/kubelet:" + v,
		KubeProxy:         "registry.k8s.io/kube-proxy:" + v,
		CoreDNS:           "registry.k8s.io/coredns/coredns:" + config.CoreDNSVersion,
		Flannel:           "cairn.local/flannel:" + config.FlannelVersion,
	}
}

// Renderer renders one node's files. Build it with New; it holds only values, so it is safe to share.
type Renderer struct {
	cfg    *config.MachineConfig
	node   Node
	paths  paths.Paths
	images Images
	layout Layout

	primary     netip.Addr
	endpoint    string // cluster endpoint URL, https://HOST:PORT
	endpointHst string // its host, a name or an address
	podCIDR     netip.Prefix
	serviceCIDR netip.Prefix
	dnsDomain   string
	maskSize    int
}

// New checks what rendering needs from the config and the node and derives the cluster's addresses.
// The config is expected to have passed config.Validate; New still refuses what would render garbage.
func New(cfg *config.MachineConfig, node Node, p paths.Paths, images Images) (*Renderer, error) {
	if cfg == nil {
		return nil, fmt.Errorf("render: no machine config")
	}
	if node.Name == "" {
		return nil, fmt.Errorf("render: node name is empty")
	}
	r := &Renderer{cfg: cfg, node: node, paths: p, images: images, layout: Layout{p}}
	primary, err := primaryIP(cfg.Machine.Kubelet.NodeIP, node.IPs)
	if err != nil {
		return nil, err
	}
	r.primary = primary

	u, err := url.Parse(cfg.Cluster.Endpoint)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil, fmt.Errorf("render: cluster.endpoint %q is not a URL like https://HOST:6443", cfg.Cluster.Endpoint)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	r.endpointHst = u.Hostname()
	r.endpoint = "https://" + net.JoinHostPort(r.endpointHst, port)

	n := cfg.Cluster.Network
	if r.podCIDR, err = prefixOr(n.PodCIDR, config.DefaultPodCIDR, "cluster.network.podCIDR"); err != nil {
		return nil, err
	}
	if r.serviceCIDR, err = prefixOr(n.ServiceCIDR, config.DefaultServiceCIDR, "cluster.network.serviceCIDR"); err != nil {
		return nil, err
	}
	r.dnsDomain = n.DNSDomain
	if r.dnsDomain == "" {
		r.dnsDomain = config.DefaultDNSDomain
	}
	r.maskSize = n.NodeCIDRMaskSize
	if r.maskSize == 0 {
		r.maskSize = config.DefaultNodeCIDRMaskSize
	}
	if _, err := nthIP(r.serviceCIDR, 10); err != nil {
		return nil, fmt.Errorf("render: cluster.network.serviceCIDR %s: %w", r.serviceCIDR, err)
	}
	return r, nil
}

// Layout returns where the rendered files live on this node.
func (r *Renderer) Layout() Layout { return r.layout }

// Endpoint is the cluster's API endpoint, https://HOST:PORT.
func (r *Renderer) Endpoint() string { return r.endpoint }

// InternalName is the name every Cairn node resolves to the API (protokube's api.internal.<cluster>):
// the cluster's virtual IP when it has one, else every control plane's address, kept current from
// the cluster's membership (workload.discoveryNames).
func (r *Renderer) InternalName() string { return "api.internal." + r.cfg.Cluster.Name }

// InternalEndpoint is the URL a worker's kubelet and the host-network add-ons use for the API: by
// InternalName on the API servers' own port, so they keep reaching an API server when the first
// control plane, whose address a cluster endpoint often is, goes away or changes its address. In
// sandbox mode (no discovery names), the cluster endpoint.
func (r *Renderer) InternalEndpoint() string {
	if !r.node.DiscoveryNames {
		return r.endpoint
	}
	return "https://" + net.JoinHostPort(r.InternalName(), strconv.Itoa(APIServerPort))
}

// PodCIDR and ServiceCIDR are the cluster's address ranges; DNSDomain its DNS domain.
func (r *Renderer) PodCIDR() netip.Prefix     { return r.podCIDR }
func (r *Renderer) ServiceCIDR() netip.Prefix { return r.serviceCIDR }
func (r *Renderer) DNSDomain() string         { return r.dnsDomain }

// NodeCIDRMaskSize is the prefix length of each node's PodCIDR (the controller-manager's
// --node-cidr-mask-size).
func (r *Renderer) NodeCIDRMaskSize() int { return r.maskSize }

// Images are the images the node runs.
func (r *Renderer) Images() Images { return r.images }

// PrimaryIP is the node address the control plane advertises and the kubelet reports.
func (r *Renderer) PrimaryIP() netip.Addr { return r.primary }

// APIServerServiceIP is the first address of the service CIDR: the kubernetes.default Service.
func (r *Renderer) APIServerServiceIP() netip.Addr {
	ip, _ := nthIP(r.serviceCIDR, 1) // checked in New
	return ip
}

// ClusterDNSIP is the tenth address of the service CIDR, kubeadm's convention for the DNS Service.
func (r *Renderer) ClusterDNSIP() netip.Addr {
	ip, _ := nthIP(r.serviceCIDR, 10) // checked in New
	return ip
}

// localAPIServer is the URL components on this node use: loopback survives a change of the node's
// address (DHCP) and is in the serving certificate.
func (r *Renderer) localAPIServer() string {
	return "https://" + net.JoinHostPort(r.loopback(), strconv.Itoa(APIServerPort))
}

// loopback is the loopback address of the primary IP's family.
func (r *Renderer) loopback() string {
	if r.primary.Is6() {
		return "::1"
	}
	return "127.0.0.1"
}

func primaryIP(nodeIP string, ips []netip.Addr) (netip.Addr, error) {
	if nodeIP != "" {
		a, err := netip.ParseAddr(nodeIP)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("render: machine.kubelet.nodeIP %q: %w", nodeIP, err)
		}
		return a.Unmap(), nil
	}
	if len(ips) == 0 || !ips[0].IsValid() {
		return netip.Addr{}, fmt.Errorf("render: the node has no IP address")
	}
	return ips[0].Unmap(), nil
}

// nodeIPs is the primary address followed by the node's other addresses, without duplicates.
func (r *Renderer) nodeIPs() []netip.Addr {
	out := []netip.Addr{r.primary}
	for _, ip := range r.node.IPs {
		ip = ip.Unmap()
		if ip.IsValid() && !containsAddr(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if a == b {
			return true
		}
	}
	return false
}

func prefixOr(s, def, field string) (netip.Prefix, error) {
	if s == "" {
		s = def
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("render: %s %q: %w", field, s, err)
	}
	return p.Masked(), nil
}

// nthIP is the n-th address after the network address of p (n=1: the first usable one).
func nthIP(p netip.Prefix, n int) (netip.Addr, error) {
	ip := p.Masked().Addr()
	for range n {
		ip = ip.Next()
		if !ip.IsValid() || !p.Contains(ip) {
			return netip.Addr{}, fmt.Errorf("has fewer than %d addresses", n+1)
		}
	}
	return ip, nil
}
