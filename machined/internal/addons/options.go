// Package addons renders Cairn's core add-ons as Kubernetes API objects: kube-proxy (Services),
// CoreDNS behind the kube-dns Service (cluster DNS) and flannel (the pod network between nodes).
//
// machined applies them with server-side apply (field manager cairn) on control-plane nodes once the API
// answers, again on every boot, so the cluster always converges on what the machine config says. Each
// add-on can be switched off in the cluster config for users who bring their own.
//
// Rendering is pure, like package kube's: it reads no files and talks to no API, so every output is
// checked by unit tests (golden files). Objects are built from k8s.io/api types, never from YAML text;
// only the add-ons' own config formats (CoreDNS's Corefile) are written as text.
//
// All objects live in kube-system: one namespace for everything Cairn runs, where the system-*-critical
// priority classes are allowed and no Pod Security level is enforced (flannel and kube-proxy need host
// network and capabilities). The images are in the node image's bundle; the caller names them.
package addons

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/paths"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Namespace holds every add-on object.
const Namespace = metav1.NamespaceSystem

// Names and label selectors that health checks look for. A selector is in the form of a list call's
// labelSelector parameter.
const (
	KubeProxyDaemonSet = "kube-proxy"
	KubeProxySelector  = "k8s-app=kube-proxy"

	CoreDNSDeployment = "coredns"
	CoreDNSSelector   = "k8s-app=kube-dns"
	KubeDNSService    = "kube-dns"

	FlannelDaemonSet = "kube-flannel-ds"
	FlannelSelector  = "app=flannel"
)

// ManagedByLabel marks every object Cairn renders, so they can be listed (and told from a user's own).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "cairn"
)

// Images are the add-ons' container images, all in the bundle.
type Images struct {
	KubeProxy string
	CoreDNS   string
	Flannel   string
}

// HostPaths are the node paths the host-network add-ons mount. They are host paths (the kubelet hands
// them to containerd, which resolves them on the host), so sandbox mode puts them under its root.
type HostPaths struct {
	// FlannelRun is flannel's runtime directory (/run/flannel): subnet.env, its record of the lease.
	FlannelRun string
	// XtablesLock is the lock file iptables programs share (/run/xtables.lock).
	XtablesLock string
	// LibModules is the kernel's module tree (/lib/modules), for kube-proxy to load what it needs.
	LibModules string
	// EtcHosts is the node's /etc/hosts, mounted into kube-proxy and flannel when APIServer is the
	// discovery name machined keeps there: the kubelet gives a host-network pod a copy made when the
	// pod starts, which would keep a control plane's old address for the pod's life. Empty: not
	// mounted (sandbox mode, where APIServer is an address).
	EtcHosts string
}

// DefaultHostPaths are the host paths under p's root: the real node's with Root "/".
func DefaultHostPaths(p paths.Paths) HostPaths {
	return HostPaths{
		FlannelRun:  p.Join("run", "flannel"),
		XtablesLock: p.Join("run", "xtables.lock"),
		LibModules:  p.Join("lib", "modules"),
	}
}

// Options is everything rendering needs, as plain values (the caller derives them from the machine
// config and kube.Renderer).
type Options struct {
	// APIServer is the URL the host-network add-ons (kube-proxy, flannel) use: the cluster endpoint,
	// https://HOST:PORT. They cannot use the kubernetes Service: kube-proxy is what makes it work.
	APIServer    string
	PodCIDR      netip.Prefix
	ServiceCIDR  netip.Prefix
	DNSDomain    string     // cluster.local
	DNSServiceIP netip.Addr // the tenth address of the service CIDR
	Images       Images
	Proxy        config.Proxy
	CoreDNS      config.CoreDNS
	// CoreDNSReplicas is the count CoreDNS runs when CoreDNS.Replicas is unset: CoreDNSReplicas' answer
	// for the cluster's nodes. Zero renders one.
	CoreDNSReplicas int32
	// CNI is cluster.network.cni; flannel's objects are rendered only for config.CNIFlannel (the default,
	// also when empty).
	CNI       string
	HostPaths HostPaths
}

func (o Options) flannelEnabled() bool { return o.CNI == "" || o.CNI == config.CNIFlannel }

// Render returns the enabled add-ons' objects in apply order: ServiceAccounts, RBAC, ConfigMaps, then
// Services and workloads, so that no pod starts before what it mounts or runs as exists.
func Render(o Options) ([]kube.Object, error) {
	ep, err := o.validate()
	if err != nil {
		return nil, err
	}
	var objs []kube.Object
	if !o.Proxy.Disabled {
		p, err := kubeProxy(o)
		if err != nil {
			return nil, err
		}
		objs = append(objs, p...)
	}
	if !o.CoreDNS.Disabled {
		c, err := coreDNS(o, ep)
		if err != nil {
			return nil, err
		}
		objs = append(objs, c...)
	}
	if o.flannelEnabled() {
		f, err := flannel(o, ep)
		if err != nil {
			return nil, err
		}
		objs = append(objs, f...)
	}
	slices.SortStableFunc(objs, func(a, b kube.Object) int { return applyRank(a) - applyRank(b) })
	return objs, nil
}

// applyRank orders kinds for applying: a pod's ServiceAccount, its permissions and its config first.
func applyRank(o kube.Object) int {
	switch o.Object.GetObjectKind().GroupVersionKind().Kind {
	case "ServiceAccount":
		return 0
	case "ClusterRole", "Role":
		return 1
	case "ClusterRoleBinding", "RoleBinding":
		return 2
	case "ConfigMap":
		return 3
	case "Service":
		return 4
	default: // workloads
		return 5
	}
}

// endpoint is APIServer split for KUBERNETES_SERVICE_HOST/PORT (flannel's and CoreDNS's).
type endpoint struct{ host, port string }

var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`)

// validate checks every field rendering reads and names each bad one; the caller gets all problems at
// once.
func (o Options) validate() (endpoint, error) {
	var bad []string
	add := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }

	ep, err := parseAPIServer(o.APIServer)
	if err != nil {
		add("APIServer: %v", err)
	}
	if !o.PodCIDR.IsValid() {
		add("PodCIDR is not set")
	}
	if !o.ServiceCIDR.IsValid() {
		add("ServiceCIDR is not set")
	}
	if o.PodCIDR.IsValid() && o.ServiceCIDR.IsValid() && o.PodCIDR.Overlaps(o.ServiceCIDR) {
		add("PodCIDR %s overlaps ServiceCIDR %s", o.PodCIDR, o.ServiceCIDR)
	}
	if !o.DNSServiceIP.IsValid() {
		add("DNSServiceIP is not set")
	} else if o.ServiceCIDR.IsValid() && !o.ServiceCIDR.Contains(o.DNSServiceIP) {
		add("DNSServiceIP %s is outside ServiceCIDR %s", o.DNSServiceIP, o.ServiceCIDR)
	}
	if len(o.DNSDomain) > 253 || !dnsName.MatchString(o.DNSDomain) {
		add("DNSDomain %q is not a DNS name (lowercase, no trailing dot)", o.DNSDomain)
	}
	switch o.CNI {
	case "", config.CNIFlannel, config.CNIBridge, config.CNINone:
	default:
		add("CNI %q is not %q, %q or %q", o.CNI, config.CNIFlannel, config.CNIBridge, config.CNINone)
	}
	image := func(field, ref string) {
		if ref == "" || strings.ContainsAny(ref, " \t\n") {
			add("Images.%s %q is not an image reference", field, ref)
		}
	}
	hostPath := func(field, p string) {
		if !path.IsAbs(p) || path.Clean(p) != p {
			add("HostPaths.%s %q is not a clean absolute path", field, p)
		}
	}
	if !o.Proxy.Disabled {
		image("KubeProxy", o.Images.KubeProxy)
		hostPath("XtablesLock", o.HostPaths.XtablesLock)
		hostPath("LibModules", o.HostPaths.LibModules)
		switch m := o.Proxy.ModeOrDefault(); m {
		case config.ProxyNFTables, config.ProxyIPTables:
		default:
			add("Proxy.Mode %q is not %q or %q", m, config.ProxyNFTables, config.ProxyIPTables)
		}
		for _, k := range slices.Sorted(maps.Keys(o.Proxy.ExtraArgs)) {
			if k == "" || strings.HasPrefix(k, "-") || strings.ContainsAny(k, "= \t\n") {
				add("Proxy.ExtraArgs: flag name %q must be given without leading dashes, '=' or spaces", k)
			}
		}
	}
	if !o.CoreDNS.Disabled {
		image("CoreDNS", o.Images.CoreDNS)
		if r := o.CoreDNS.Replicas; r < 0 {
			add("CoreDNS.Replicas %d is not a positive number (set CoreDNS.Disabled to run none)", r)
		}
	}
	if o.HostPaths.EtcHosts != "" {
		hostPath("EtcHosts", o.HostPaths.EtcHosts)
	}
	if o.flannelEnabled() {
		image("Flannel", o.Images.Flannel)
		hostPath("FlannelRun", o.HostPaths.FlannelRun)
		hostPath("XtablesLock", o.HostPaths.XtablesLock)
	}
	if len(bad) > 0 {
		return endpoint{}, fmt.Errorf("render add-ons: %s", strings.Join(dedup(bad), "; "))
	}
	return ep, nil
}

// parseAPIServer accepts exactly https://HOST:PORT (an optional trailing slash aside): the add-ons put
// it in a kubeconfig and in KUBERNETES_SERVICE_HOST/PORT, which have no room for a path.
func parseAPIServer(s string) (endpoint, error) {
	u, err := url.Parse(s)
	if err != nil {
		return endpoint{}, fmt.Errorf("%q is not a URL", s)
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return endpoint{}, fmt.Errorf("%q is not https://HOST:PORT", s)
	}
	host, port := u.Hostname(), u.Port()
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return endpoint{}, fmt.Errorf("%q is not https://HOST:PORT (the port is required)", s)
	}
	return endpoint{host: host, port: port}, nil
}

// server is APIServer without a trailing slash, as kubeconfigs write it.
func (o Options) server() string { return strings.TrimSuffix(o.APIServer, "/") }

// dedup drops repeats (XtablesLock is checked for both kube-proxy and flannel), keeping the order.
func dedup(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
