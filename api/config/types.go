// Package config holds Cairn's machine configuration: the versioned YAML types, strict decoding, validation
// that reports every problem with its field path, and the generator behind `cairnctl gen config`.
//
// It is shared by machined (which applies a config) and cairnctl (which writes and checks one), so it
// imports nothing else of Cairn's.
package config

import "time"

// APIVersion and Kind identify a machine config document.
const (
	APIVersion        = "cairn.dev/v1alpha1"
	KindMachineConfig = "MachineConfig"
	KindSecrets       = "Secrets"
)

// The ports a node serves on by default: the machine API, and the join service of a control plane.
const (
	MachinePort = 50000
	JoinPort    = 50001
)

// Machine types.
const (
	TypeControlPlane = "controlplane"
	TypeWorker       = "worker"
)

// MachineConfig is the whole configuration of one node.
type MachineConfig struct {
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	Kind       string `yaml:"kind" json:"kind"`
	// Bootstrap, in a platform's user data, tells a node in maintenance mode to init itself with this
	// config (the first control plane of a cluster made from user data). Read nowhere else.
	Bootstrap bool    `yaml:"bootstrap,omitempty" json:"bootstrap,omitempty"`
	Machine   Machine `yaml:"machine" json:"machine"`
	Cluster   Cluster `yaml:"cluster" json:"cluster"`
}

// Machine is what is specific to this node.
type Machine struct {
	// Type is controlplane or worker.
	Type string `yaml:"type" json:"type"`
	// Hostname overrides the name from DHCP or the generated one.
	Hostname string `yaml:"hostname,omitempty" json:"hostname,omitempty"`
	// CertSANs are extra names and addresses put into the node's API certificate.
	CertSANs []string `yaml:"certSANs,omitempty" json:"certSANs,omitempty"`
	Network  Network  `yaml:"network,omitempty" json:"network,omitempty"`
	Time     Time     `yaml:"time,omitempty" json:"time,omitempty"`
	Disks    Disks    `yaml:"disks" json:"disks"`
	Kubelet  Kubelet  `yaml:"kubelet,omitempty" json:"kubelet,omitempty"`
	// NodeLabels and NodeTaints are put on the node's Kubernetes Node, and kept there: see nodespec.go.
	NodeLabels map[string]string `yaml:"nodeLabels,omitempty" json:"nodeLabels,omitempty"`
	NodeTaints []NodeTaint       `yaml:"nodeTaints,omitempty" json:"nodeTaints,omitempty"`
	// Registries configures how containerd reaches image registries, keyed by the registry's host[:port]
	// as image names spell it (docker.io, ghcr.io, registry.example.com:5000). Images the node carries
	// never need a registry; these are for the ones it does not.
	Registries map[string]Registry `yaml:"registries,omitempty" json:"registries,omitempty"`
	// Upgrade says which upgrade bundles the node takes.
	Upgrade Upgrade `yaml:"upgrade,omitempty" json:"upgrade,omitempty"`
	// Install is the disk a node booted from the ISO installs itself onto when cairnctl install names
	// none.
	Install Install `yaml:"install,omitempty" json:"install,omitempty"`
	// TPM is the measured lock's policy (see machined/internal/tpm).
	TPM TPM `yaml:"tpm,omitempty" json:"tpm,omitempty"`
}

// TPM says what the node does with its TPM.
type TPM struct {
	// ContinueOnMismatch lets the node reach Running when the TPM's PCR disagrees with the node's own
	// measurement log (something else extended it). Without it such a node stops before its services,
	// with the reason in status.
	ContinueOnMismatch bool `yaml:"continueOnMismatch,omitempty" json:"continueOnMismatch,omitempty"`
}

// Install picks the disk for `cairnctl install` (the Install RPC) on a node booted from the ISO.
type Install struct {
	Disk Selector `yaml:"disk,omitempty" json:"disk,omitempty"`
	// Wipe lets the install erase what the disk holds; without it only a blank disk is taken.
	Wipe bool `yaml:"wipe,omitempty" json:"wipe,omitempty"`
}

// Upgrade says which upgrade bundles (api/upgrade) the node takes.
type Upgrade struct {
	// PublicKey is an Ed25519 public key, its 32 bytes in base64 (cairnctl gen upgrade-key prints one):
	// when set, the node takes only bundles signed by its key; unset, any bundle whose parts match its
	// manifest.
	PublicKey string `yaml:"publicKey,omitempty" json:"publicKey,omitempty"`
}

// Registry is how containerd talks to one registry host: mirrors to try first, the CA that signs its
// certificate, credentials. The same settings apply when the host is used as another registry's mirror.
type Registry struct {
	// Mirrors are URLs (https://HOST[:PORT][/PATH], or http:// for a plain-HTTP mirror) tried in order
	// before the registry itself.
	Mirrors []string `yaml:"mirrors,omitempty" json:"mirrors,omitempty"`
	// CA is a PEM bundle trusted for this host's certificate, in addition to the system's.
	CA string `yaml:"ca,omitempty" json:"ca,omitempty"`
	// InsecureSkipVerify accepts any certificate from this host: only for a lab, and only when asked.
	InsecureSkipVerify bool `yaml:"insecureSkipVerify,omitempty" json:"insecureSkipVerify,omitempty"`
	// Username and Password are sent to this host as HTTP basic authorization (and to the token service
	// it names).
	Username string `yaml:"username,omitempty" json:"username,omitempty"`
	Password string `yaml:"password,omitempty" json:"password,omitempty"`
}

// Network configures the node's interfaces. Without interfaces, every wired interface uses DHCP (or what
// the kernel's ip= parameters say). A listed interface is configured exactly as written; the others keep
// what the boot gave them.
type Network struct {
	Interfaces []Interface `yaml:"interfaces,omitempty" json:"interfaces,omitempty"`
	// Nameservers, when set, are the node's resolvers; those a DHCP server offers are then not used.
	Nameservers []string `yaml:"nameservers,omitempty" json:"nameservers,omitempty"`
	// Search lists the resolver's search domains.
	Search []string `yaml:"search,omitempty" json:"search,omitempty"`
}

// Interface is the static or DHCP configuration of one link: a NIC of the machine, or a bond or a VLAN
// that Cairn creates under this name.
type Interface struct {
	Name      string   `yaml:"name" json:"name"`
	DHCP      bool     `yaml:"dhcp,omitempty" json:"dhcp,omitempty"`
	Addresses []string `yaml:"addresses,omitempty" json:"addresses,omitempty"` // CIDR notation
	Gateway   string   `yaml:"gateway,omitempty" json:"gateway,omitempty"`
	MTU       int      `yaml:"mtu,omitempty" json:"mtu,omitempty"`
	Routes    []Route  `yaml:"routes,omitempty" json:"routes,omitempty"`
	// Bond makes this interface a bond of other NICs (which then carry no configuration of their own).
	Bond *Bond `yaml:"bond,omitempty" json:"bond,omitempty"`
	// VLAN makes this interface a tagged VLAN on another interface (a NIC or a bond).
	VLAN *VLAN `yaml:"vlan,omitempty" json:"vlan,omitempty"`
}

// Route sends traffic for Network through Gateway (or straight out of the interface when Gateway is empty).
type Route struct {
	Network string `yaml:"network" json:"network"` // CIDR notation; 0.0.0.0/0 is a default route
	Gateway string `yaml:"gateway,omitempty" json:"gateway,omitempty"`
	Metric  int    `yaml:"metric,omitempty" json:"metric,omitempty"`
}

// Bond modes Cairn creates.
const (
	BondActiveBackup = "active-backup"
	BondLACP         = "802.3ad"
)

// Bond lists a bond's member NICs and its mode.
type Bond struct {
	Mode       string   `yaml:"mode" json:"mode"` // active-backup or 802.3ad
	Interfaces []string `yaml:"interfaces" json:"interfaces"`
}

// VLAN is a VLAN's parent interface and tag.
type VLAN struct {
	Parent string `yaml:"parent" json:"parent"`
	ID     int    `yaml:"id" json:"id"` // 1..4094
}

// Time says where the node's clock comes from. Without servers the node keeps the clock the machine
// booted with (its RTC, or the hypervisor's).
type Time struct {
	// Servers are NTP servers (host or host:port, port 123 by default), asked in order by machined's SNTP
	// client. With servers, a node waits up to BootWait at each start for a first answer before it checks
	// or issues certificates.
	Servers []string `yaml:"servers,omitempty" json:"servers,omitempty"`
	// BootWait bounds that wait, as a Go duration such as 10s (the default); the node goes on without a
	// sync after it and keeps asking.
	BootWait string `yaml:"bootWait,omitempty" json:"bootWait,omitempty"`
}

// DefaultTimeBootWait is how long a node waits at each start for its first answer from a time server.
const DefaultTimeBootWait = 10 * time.Second

// BootWaitOrDefault is BootWait parsed (a valid config has a parsable one), or DefaultTimeBootWait.
func (t Time) BootWaitOrDefault() time.Duration {
	if d, err := time.ParseDuration(t.BootWait); err == nil && d >= 0 {
		return d
	}
	return DefaultTimeBootWait
}

// Disks says which disk holds each of Cairn's volumes.
type Disks struct {
	// State holds the machine config, the node lock and the node identity (small).
	State DiskSpec `yaml:"state" json:"state"`
	// Ephemeral is mounted at /var: containerd, kubelet, logs.
	Ephemeral DiskSpec `yaml:"ephemeral" json:"ephemeral"`
	// Etcd is mounted at /var/lib/etcd; control-plane nodes only.
	Etcd *DiskSpec `yaml:"etcd,omitempty" json:"etcd,omitempty"`
}

// DiskSpec selects a disk for one volume and says how Cairn may treat it. The scalar form `tmpfs` asks for
// a RAM-backed volume instead of a disk (a diskless node, said out loud).
type DiskSpec struct {
	Tmpfs      bool `yaml:"-" json:"tmpfs,omitempty"`
	Selector   `yaml:",inline" json:",inline"`
	Filesystem string `yaml:"filesystem,omitempty" json:"filesystem,omitempty"` // xfs (default) or ext4
	// Wipe allows Cairn to format this exact disk even though it holds something else.
	Wipe bool `yaml:"wipe,omitempty" json:"wipe,omitempty"`
	// Encryption "tpm" (STATE only) makes the volume LUKS2 when it is formatted, its key sealed to this
	// machine's TPM (machined/internal/disk/crypt). A volume already formatted stays as it is: the disk,
	// not this field, says whether a found volume is encrypted.
	Encryption string `yaml:"encryption,omitempty" json:"encryption,omitempty"`
}

// EncryptionTPM is the only encryption: LUKS2 with the key sealed to the machine's TPM.
const EncryptionTPM = "tpm"

// Selector picks exactly one disk; every field that is set must match.
type Selector struct {
	Path    string `yaml:"path,omitempty" json:"path,omitempty"` // /dev/sdb or /dev/disk/by-id/...
	Serial  string `yaml:"serial,omitempty" json:"serial,omitempty"`
	Model   string `yaml:"model,omitempty" json:"model,omitempty"`
	WWN     string `yaml:"wwn,omitempty" json:"wwn,omitempty"`
	Label   string `yaml:"label,omitempty" json:"label,omitempty"` // an existing filesystem or partition label
	MinSize Size   `yaml:"minSize,omitempty" json:"minSize,omitempty"`
	MaxSize Size   `yaml:"maxSize,omitempty" json:"maxSize,omitempty"`
}

// Kubelet settings, rendered into the kubelet's config file.
type Kubelet struct {
	NodeIP    string            `yaml:"nodeIP,omitempty" json:"nodeIP,omitempty"`
	MaxPods   int32             `yaml:"maxPods,omitempty" json:"maxPods,omitempty"`
	ExtraArgs map[string]string `yaml:"extraArgs,omitempty" json:"extraArgs,omitempty"`
}

// Cluster is what every node of a cluster shares.
type Cluster struct {
	Name string `yaml:"name" json:"name"`
	// ID is random, generated once per cluster; it is part of every Cairn disk label, so one cluster never
	// mistakes another's disk for its own.
	ID string `yaml:"id" json:"id"`
	// Endpoint is the Kubernetes API endpoint, https://HOST:PORT.
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// VIP is a virtual IP on the control planes' network that one control plane holds at a time, elected
	// through etcd and announced with gratuitous ARP; the endpoint's host is then the VIP, so the API
	// survives the loss of any one control plane. Empty: the endpoint is a control plane's own address,
	// or an external load balancer's (see the README).
	VIP               string         `yaml:"vip,omitempty" json:"vip,omitempty"`
	KubernetesVersion string         `yaml:"kubernetesVersion,omitempty" json:"kubernetesVersion,omitempty"`
	Network           ClusterNetwork `yaml:"network,omitempty" json:"network,omitempty"`
	// MachineCA is the PEM certificate of the CA behind the machine API; every node has it.
	MachineCA string `yaml:"machineCA,omitempty" json:"machineCA,omitempty"`
	// Secrets are the cluster's keys; control-plane configs only.
	Secrets *Secrets `yaml:"secrets,omitempty" json:"secrets,omitempty"`
	Join    *Join    `yaml:"join,omitempty" json:"join,omitempty"`
	// JoinAttestation is what the join services ask of a joining node's TPM.
	JoinAttestation   JoinAttestation `yaml:"joinAttestation,omitempty" json:"joinAttestation,omitempty"`
	APIServer         Component       `yaml:"apiServer,omitempty" json:"apiServer,omitempty"`
	ControllerManager Component       `yaml:"controllerManager,omitempty" json:"controllerManager,omitempty"`
	Scheduler         Component       `yaml:"scheduler,omitempty" json:"scheduler,omitempty"`
	Etcd              Etcd            `yaml:"etcd,omitempty" json:"etcd,omitempty"`
	// Proxy and CoreDNS are core add-ons machined applies on control planes (see DESIGN.md §12).
	Proxy   Proxy   `yaml:"proxy,omitempty" json:"proxy,omitempty"`
	CoreDNS CoreDNS `yaml:"coreDNS,omitempty" json:"coreDNS,omitempty"`
}

// Pod network choices (cluster.network.cni).
const (
	// CNIFlannel: flannel (vxlan) routes every node's PodCIDR to the others; the default.
	CNIFlannel = "flannel"
	// CNIBridge: a bridge on each node's PodCIDR and nothing between nodes (one node, or routes of your own).
	CNIBridge = "bridge"
	// CNINone: Cairn writes no CNI config; nodes go Ready once the user's network add-on installs one.
	CNINone = "none"
)

// kube-proxy modes (cluster.proxy.mode).
const (
	ProxyNFTables = "nftables"
	ProxyIPTables = "iptables"
)

// Proxy configures kube-proxy, which runs on every node as a DaemonSet.
type Proxy struct {
	// Disabled leaves kube-proxy out, for users who bring their own Service implementation.
	Disabled bool `yaml:"disabled,omitempty" json:"disabled,omitempty"`
	// Mode is nftables (default) or iptables.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// ExtraArgs are kube-proxy flags. kube-proxy reads its settings from its config file and takes only
	// the logging flags (v, vmodule) and hostname-override from the command line.
	ExtraArgs map[string]string `yaml:"extraArgs,omitempty" json:"extraArgs,omitempty"`
}

// ModeOrDefault is the proxy mode to run.
func (p Proxy) ModeOrDefault() string {
	if p.Mode == "" {
		return ProxyNFTables
	}
	return p.Mode
}

// DefaultCoreDNSReplicas is how many CoreDNS replicas a cluster of two nodes or more runs when the
// config sets none: two, so DNS survives one node or one pod going away. A cluster of one node runs one
// (the rule of kops' DNS autoscaler, preventSinglePointFailure): a second pod beside the first survives
// no node loss, and on a small node its start and memory are paid while the cluster comes up.
const DefaultCoreDNSReplicas = 2

// CoreDNS configures the cluster's DNS, served by CoreDNS behind the kube-dns Service.
type CoreDNS struct {
	// Disabled leaves CoreDNS out, for users who bring their own cluster DNS (at the same Service address).
	Disabled bool `yaml:"disabled,omitempty" json:"disabled,omitempty"`
	// Replicas of the CoreDNS Deployment, fixed. Unset, the control planes keep it at one while the
	// cluster has one schedulable node and at 2 from its second on (spread over nodes).
	Replicas int32 `yaml:"replicas,omitempty" json:"replicas,omitempty"`
}

// ClusterNetwork holds the cluster's address ranges.
type ClusterNetwork struct {
	PodCIDR     string `yaml:"podCIDR,omitempty" json:"podCIDR,omitempty"`
	ServiceCIDR string `yaml:"serviceCIDR,omitempty" json:"serviceCIDR,omitempty"`
	DNSDomain   string `yaml:"dnsDomain,omitempty" json:"dnsDomain,omitempty"`
	// NodeCIDRMaskSize is the size of each node's slice of PodCIDR.
	NodeCIDRMaskSize int `yaml:"nodeCIDRMaskSize,omitempty" json:"nodeCIDRMaskSize,omitempty"`
	// CNI is the pod network: flannel (default), bridge or none.
	CNI string `yaml:"cni,omitempty" json:"cni,omitempty"`
}

// CNIOrDefault is the pod network to run.
func (n ClusterNetwork) CNIOrDefault() string {
	if n.CNI == "" {
		return CNIFlannel
	}
	return n.CNI
}

// Component holds the flags of one control-plane component beyond the typed settings.
type Component struct {
	ExtraArgs map[string]string `yaml:"extraArgs,omitempty" json:"extraArgs,omitempty"`
	// CertSANs are extra names for the component's serving certificate (kube-apiserver).
	CertSANs []string `yaml:"certSANs,omitempty" json:"certSANs,omitempty"`
}

// Etcd settings.
type Etcd struct {
	QuotaBackendBytes int64             `yaml:"quotaBackendBytes,omitempty" json:"quotaBackendBytes,omitempty"`
	ExtraArgs         map[string]string `yaml:"extraArgs,omitempty" json:"extraArgs,omitempty"`
}

// Join tells a node how to join an existing cluster.
type Join struct {
	// Endpoints are the join services of control-plane nodes, HOST:PORT (port 50001 by default).
	Endpoints []string `yaml:"endpoints,omitempty" json:"endpoints,omitempty"`
	Token     string   `yaml:"token,omitempty" json:"token,omitempty"`
}

// Secrets are every CA and key of a cluster. They live in secrets.yaml and in control-plane configs.
type Secrets struct {
	APIVersion        string  `yaml:"apiVersion,omitempty" json:"apiVersion,omitempty"`
	Kind              string  `yaml:"kind,omitempty" json:"kind,omitempty"`
	MachineCA         CertKey `yaml:"machineCA" json:"machineCA"`
	KubernetesCA      CertKey `yaml:"kubernetesCA" json:"kubernetesCA"`
	EtcdCA            CertKey `yaml:"etcdCA" json:"etcdCA"`
	FrontProxyCA      CertKey `yaml:"frontProxyCA" json:"frontProxyCA"`
	ServiceAccountKey string  `yaml:"serviceAccountKey" json:"serviceAccountKey"` // PEM private key
	// BootstrapToken is the kubelet TLS bootstrap token, ID.SECRET in kubeadm's format.
	BootstrapToken string `yaml:"bootstrapToken" json:"bootstrapToken"`
}

// CertKey is a PEM certificate and its PEM private key.
type CertKey struct {
	Cert string `yaml:"cert" json:"cert"`
	Key  string `yaml:"key" json:"key"`
}
