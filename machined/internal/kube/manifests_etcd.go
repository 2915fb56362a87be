package kube

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// etcd's ports.
const (
	EtcdClientPort  = 2379
	EtcdPeerPort    = 2380
	EtcdMetricsPort = 2381 // plain HTTP on loopback: health and metrics, no client certificate needed
)

// EtcdMember is one member of the etcd cluster, by name and peer URL.
type EtcdMember struct {
	Name    string
	PeerURL string
}

// EtcdOptions say which etcd cluster this member starts in.
type EtcdOptions struct {
	// Existing lists the members of an existing cluster this node joins (it must already have been
	// added with MemberAdd). Empty: this node starts a new single-member cluster.
	Existing []EtcdMember
}

// EtcdPeerURL is the peer URL this node's member advertises: by the node's name when the node keeps
// discovery names (every control plane resolves each member's name through /etc/hosts, kept current from
// the cluster's membership, so a member whose address changes stays reachable at the same URL), else by
// its primary address.
func (r *Renderer) EtcdPeerURL() string { return EtcdPeerURL(r.etcdHost()) }

// EtcdPeerURLs are the peer URLs this node's member may have in the cluster's member list: EtcdPeerURL,
// and the one by address that a member started by an earlier Cairn (or in sandbox mode) advertises.
func (r *Renderer) EtcdPeerURLs() []string {
	return slices.Compact([]string{r.EtcdPeerURL(), EtcdPeerURL(r.primary.String())})
}

// EtcdPeerURL is the etcd peer URL of a control plane at host, a name or an address (a joining one, for
// its learner entry).
func EtcdPeerURL(host string) string { return etcdURL(host, EtcdPeerPort) }

// EtcdClientURLAt is the etcd client URL of a control plane at host, a name or an address.
func EtcdClientURLAt(host string) string { return etcdURL(host, EtcdClientPort) }

// EtcdClientURL is the client URL this node's member advertises, by name like EtcdPeerURL.
func (r *Renderer) EtcdClientURL() string { return etcdURL(r.etcdHost(), EtcdClientPort) }

// etcdHost is the host of the URLs this node's member advertises.
func (r *Renderer) etcdHost() string {
	if r.node.DiscoveryNames {
		return r.node.Name
	}
	return r.primary.String()
}

// EtcdName is the name every control plane resolves to the cluster's etcd members, its own first: the
// API servers' second etcd endpoint, so an API server whose own member is down or catching up is served by
// another (protokube's etcd names, one for the whole cluster).
func (r *Renderer) EtcdName() string { return "etcd.internal." + r.cfg.Cluster.Name }

func etcdURL(host string, port int) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// EtcdPod is etcd's static pod: TLS for clients and peers with the etcd CA's certificates, data on the
// ETCD volume, health on a loopback HTTP port.
func (r *Renderer) EtcdPod(o EtcdOptions) *corev1.Pod {
	name := r.node.Name
	state, members := "new", []EtcdMember{{Name: name, PeerURL: r.EtcdPeerURL()}}
	if len(o.Existing) > 0 {
		state, members = "existing", o.Existing
	}
	initial := make([]string, 0, len(members))
	for _, m := range members {
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	sort.Strings(initial)

	lo := r.loopback()
	flags := []arg{
		{"name", name},
		{"data-dir", containerEtcdDataDir},
		// etcd listens on addresses only; it advertises names (EtcdPeerURL).
		{"listen-client-urls", etcdURL(lo, EtcdClientPort) + "," + etcdURL(r.primary.String(), EtcdClientPort)},
		{"advertise-client-urls", r.EtcdClientURL()},
		{"listen-peer-urls", EtcdPeerURL(r.primary.String())},
		{"initial-advertise-peer-urls", r.EtcdPeerURL()},
		{"initial-cluster", strings.Join(initial, ",")},
		{"initial-cluster-state", state},
		{"cert-file", inPKI(EtcdServerCert)},
		{"key-file", inPKI(EtcdServerKey)},
		{"trusted-ca-file", inPKI(EtcdCACert)},
		{"client-cert-auth", "true"},
		{"peer-cert-file", inPKI(EtcdPeerCert)},
		{"peer-key-file", inPKI(EtcdPeerKey)},
		{"peer-trusted-ca-file", inPKI(EtcdCACert)},
		{"peer-client-cert-auth", "true"},
		{"snapshot-count", "10000"},
		{"listen-metrics-urls", "http://" + net.JoinHostPort(lo, strconv.Itoa(EtcdMetricsPort))},
		{"feature-gates", "InitialCorruptCheck=true"},
		// No --watch-progress-notify-interval (kubeadm sets 5s): the API server asks etcd for a progress
		// notification when a consistent read waits on its watch cache (RequestWatchProgress), so etcd's
		// default of 10 minutes is enough. At 5s every one of the API server's ~70 watches got a
		// notification every 5 s: on an idle one-vCPU emulated control plane that was a quarter of etcd's
		// CPU and a tenth of the API server's (docs/figures.md).
	}
	if q := r.cfg.Cluster.Etcd.QuotaBackendBytes; q > 0 {
		flags = append(flags, arg{"quota-backend-bytes", fmt.Sprint(q)})
	}

	vols, vms := volumes(append([]hostMount{
		{name: "etcd-data", hostPath: r.layout.EtcdData(), mountPath: containerEtcdDataDir},
		{name: "etcd-certs", hostPath: r.layout.PKIFile("etcd"), mountPath: containerPKIDir + "/etcd",
			readOnly: true, typ: hostPathType(corev1.HostPathDirectory)},
	}, r.etcHostsMount()...))
	health := probe{host: lo, port: EtcdMetricsPort, scheme: corev1.URISchemeHTTP}
	// serializable: a liveness check must not depend on quorum, or one lost peer restarts them all.
	live := health
	live.path = "/health?serializable=true"
	return staticPod(corev1.Container{
		Name:         Etcd,
		Image:        r.images.Etcd,
		Command:      command("etcd", flags, r.cfg.Cluster.Etcd.ExtraArgs),
		VolumeMounts: vms,
		// A CPU request is also the container's cpu.weight among the pods: etcd is what every request
		// waits on, so it gets a share like the API server's. At kubeadm's 100m a busy emulated control
		// plane gave it a tenth of the pods' CPU: its ReadIndex waits and applies took seconds, lease
		// renewals timed out and the controller-manager and the scheduler lost their leases. The 100m
		// it gets comes from the controller-manager, so the requests add up as before.
		Resources:     requests("200m", "100Mi"),
		LivenessProbe: live.liveness(),
		StartupProbe:  live.startup(),
	}, vols)
}

// EtcdManifest is etcd's static pod file. Write it only once the ETCD volume is mounted: before that,
// etcd would start on the root filesystem and the cluster's data would vanish at the next boot.
func (r *Renderer) EtcdManifest(o EtcdOptions) (File, error) {
	return r.ManifestFile(r.EtcdPod(o))
}
