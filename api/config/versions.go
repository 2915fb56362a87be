package config

// KubernetesVersion is the one Kubernetes version the image carries (see README: why this one). The bundle
// builder (image/bundle) reads it from here through versions.env's test, so the two never drift.
const KubernetesVersion = "v1.37.2"

// Defaults for the cluster network.
const (
	DefaultPodCIDR          = "10.244.0.0/16"
	DefaultServiceCIDR      = "10.96.0.0/12"
	DefaultDNSDomain        = "cluster.local"
	DefaultNodeCIDRMaskSize = 24
)
