package config

// The versions the image carries. image/bundle/versions.env is where they are chosen (the bundle builder
// reads it); TestVersionsMatchBundle fails the build when these drift from it. See the README for why
// these versions.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.6.16"
	PauseTag          = "3.10.2"
	// CoreDNSVersion is also the tag of the CoreDNS image (registry.k8s.io/coredns/coredns:v1.15.0).
	CoreDNSVersion = "v1.15.0"
	// FlannelVersion is also the tag of the flannel image (cairn.local/flannel:v0.28.10).
	FlannelVersion = "v0.28.10"
)

// Defaults for the cluster network.
const (
	DefaultPodCIDR          = "10.244.0.0/16"
	DefaultServiceCIDR      = "10.96.0.0/12"
	DefaultDNSDomain        = "cluster.local"
	DefaultNodeCIDRMaskSize = 24
)
