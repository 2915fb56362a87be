package kube

import (
	"path/filepath"

	"github.com/cairn-os/cairn/machined/internal/paths"
)

// Names of the PKI files, relative to the PKI directory; kubeadm's layout, so tools and habits carry over.
const (
	CACert               = "ca.crt"
	CAKey                = "ca.key"
	APIServerCert        = "apiserver.crt"
	APIServerKey         = "apiserver.key"
	APIServerKubeletCert = "apiserver-kubelet-client.crt"
	APIServerKubeletKey  = "apiserver-kubelet-client.key"
	APIServerEtcdCert    = "apiserver-etcd-client.crt"
	APIServerEtcdKey     = "apiserver-etcd-client.key"
	FrontProxyCACert     = "front-proxy-ca.crt"
	FrontProxyCAKey      = "front-proxy-ca.key"
	FrontProxyClientCert = "front-proxy-client.crt"
	FrontProxyClientKey  = "front-proxy-client.key"
	EtcdCACert           = "etcd/ca.crt"
	EtcdCAKey            = "etcd/ca.key"
	EtcdServerCert       = "etcd/server.crt"
	EtcdServerKey        = "etcd/server.key"
	EtcdPeerCert         = "etcd/peer.crt"
	EtcdPeerKey          = "etcd/peer.key"
	EtcdHealthcheckCert  = "etcd/healthcheck-client.crt"
	EtcdHealthcheckKey   = "etcd/healthcheck-client.key"
	ServiceAccountKey    = "sa.key"
	// The controller-manager's and the scheduler's serving certificates (their /healthz ports, on
	// loopback). kubeadm lets each generate a self-signed one in memory at every start: two RSA-2048
	// keys each, seconds of CPU under emulation while the API server is starting.
	ControllerManagerServerCert = "controller-manager-server.crt"
	ControllerManagerServerKey  = "controller-manager-server.key"
	SchedulerServerCert         = "scheduler-server.crt"
	SchedulerServerKey          = "scheduler-server.key"
	ServiceAccountPublic        = "sa.pub"
	AdminConf                   = "admin.conf"
	ControllerManagerConf       = "controller-manager.conf"
	SchedulerConf               = "scheduler.conf"
	KubeletConf                 = "kubelet.conf"
	BootstrapKubeletConf        = "bootstrap-kubelet.conf"
	containerPKIDir             = "/etc/kubernetes/pki"
	containerKubernetesDir      = "/etc/kubernetes"
	containerEtcdDataDir        = "/var/lib/etcd"
)

// Layout is where a node keeps Kubernetes' files, under paths.Paths.
// NewLayout is the layout under p, for code that needs the paths without rendering anything.
func NewLayout(p paths.Paths) Layout { return Layout{p} }

type Layout struct {
	p paths.Paths
}

// Kubernetes is /etc/kubernetes: kubeconfigs, pki/, manifests/.
func (l Layout) Kubernetes() string { return l.p.Kubernetes() }

// PKI is /etc/kubernetes/pki.
func (l Layout) PKI() string { return filepath.Join(l.p.Kubernetes(), "pki") }

// PKIFile is a file under the PKI directory (one of the names above).
func (l Layout) PKIFile(name string) string { return filepath.Join(l.PKI(), name) }

// KubernetesFile is a file directly under /etc/kubernetes (a kubeconfig).
func (l Layout) KubernetesFile(name string) string { return filepath.Join(l.p.Kubernetes(), name) }

// Manifests is the kubelet's static pod directory.
func (l Layout) Manifests() string { return filepath.Join(l.p.Kubernetes(), "manifests") }

// Manifest is the static pod file of one component (etcd, kube-apiserver, ...).
func (l Layout) Manifest(component string) string {
	return filepath.Join(l.Manifests(), component+".yaml")
}

// EtcdData is the ETCD volume.
func (l Layout) EtcdData() string { return l.p.Etcd() }

// KubeletDir is the kubelet's root directory.
func (l Layout) KubeletDir() string { return l.p.Join("var", "lib", "kubelet") }

// KubeletCertDir is the kubelet's certificate store (its --cert-dir): the client pair it rotates
// (kubelet-client-current.pem) and the serving pair it asks the cluster for. Under KubeletDir, so sandbox
// mode's kubelet keeps it across its container's restarts as a node does.
func (l Layout) KubeletCertDir() string { return filepath.Join(l.KubeletDir(), "pki") }

// KubeletConfig is the kubelet's KubeletConfiguration file.
func (l Layout) KubeletConfig() string { return filepath.Join(l.KubeletDir(), "config.yaml") }

// PodLogs is where container logs go (containerd writes them, kubelet reads and rotates them).
func (l Layout) PodLogs() string { return l.p.Join("var", "log", "pods") }

// Log is /var/log.
func (l Layout) Log() string { return l.p.Join("var", "log") }

// ContainerdConfig is containerd's config.toml.
func (l Layout) ContainerdConfig() string { return l.p.Join("etc", "containerd", "config.toml") }

// RegistryHostsDir is containerd's registry configuration directory: HOST/hosts.toml and HOST/ca.crt.
func (l Layout) RegistryHostsDir() string { return l.p.Join("etc", "containerd", "certs.d") }

// ContainerdRoot is containerd's persistent root (content, snapshots, metadata).
func (l Layout) ContainerdRoot() string { return l.p.Join("var", "lib", "containerd") }

// ContainerdState is containerd's runtime state directory.
func (l Layout) ContainerdState() string { return l.p.Join("run", "containerd") }

// ContainerdSocket is containerd's gRPC socket (CRI included).
func (l Layout) ContainerdSocket() string {
	return filepath.Join(l.ContainerdState(), "containerd.sock")
}

// CNIConfDir is where CNI network configs live.
func (l Layout) CNIConfDir() string { return l.p.Join("etc", "cni", "net.d") }

// Opt is /opt: empty in the root image, a mount of OptStore on a node, so that what an add-on installs
// on the host (a network add-on's CNI plugins) has somewhere to go.
func (l Layout) Opt() string { return l.p.Join("opt") }

// OptStore holds /opt's contents on EPHEMERAL (/var), where they last across reboots.
func (l Layout) OptStore() string { return l.p.Join("var", "opt") }

// AddonCNIBinDir is where a network add-on of the user's installs its CNI plugins: /opt/cni/bin, the
// path their installers write to. containerd looks there after the payload's plugins.
func (l Layout) AddonCNIBinDir() string { return filepath.Join(l.Opt(), "cni", "bin") }

// CNIConf is Cairn's bridge network config.
func (l Layout) CNIConf() string { return filepath.Join(l.CNIConfDir(), "10-cairn.conflist") }

// CNIState is host-local IPAM's allocation store.
func (l Layout) CNIState() string { return l.p.Join("var", "lib", "cni", "networks") }

// ResolvConf is the node's resolver configuration.
func (l Layout) ResolvConf() string { return l.p.Join("etc", "resolv.conf") }
