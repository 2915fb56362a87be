package kube

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// CNIBridge is the Linux bridge every pod of the node is attached to.
const CNIBridge = "cni0"

// CNIOptions shape the pod network. The zero value is what a Cairn node wants.
type CNIOptions struct {
	// NoMasquerade leaves out ipMasq (the bridge plugin's SNAT of traffic leaving the pod CIDR) and the
	// portmap plugin. Both program netfilter through an iptables or nft binary on the host; a host that
	// has neither must turn them off or every pod sandbox fails.
	NoMasquerade bool
	// ClusterMasquerade leaves out only ipMasq: the network add-on (flannel's --ip-masq) masquerades
	// traffic that leaves the cluster's pod CIDR. The bridge plugin only knows this node's slice, so it
	// would also hide the source of pod traffic to other nodes' pods. Host ports (portmap) stay.
	ClusterMasquerade bool
	// MTU of the bridge and the pods' interfaces; 0 keeps the plugin's default.
	MTU int
}

// The conflist's shape: the fields of the bridge, host-local and portmap plugins (CNI plugins v1.9).
type cniConfList struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []any  `json:"plugins"`
}

type bridgeConf struct {
	Type        string    `json:"type"`
	Bridge      string    `json:"bridge"`
	IsGateway   bool      `json:"isGateway"`
	IPMasq      bool      `json:"ipMasq"`
	HairpinMode bool      `json:"hairpinMode"`
	MTU         int       `json:"mtu,omitempty"`
	IPAM        hostLocal `json:"ipam"`
}

type hostLocal struct {
	Type    string        `json:"type"`
	Ranges  [][]ipamRange `json:"ranges"`
	Routes  []ipamRoute   `json:"routes"`
	DataDir string        `json:"dataDir"`
}

type ipamRange struct {
	Subnet string `json:"subnet"`
}

type ipamRoute struct {
	Dst string `json:"dst"`
}

type portmapConf struct {
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities"`
	SNAT         bool            `json:"snat"`
}

// CNIConfig is the node's pod network (kops' cbr0 idea, with no add-on to install): one bridge, the
// node's PodCIDR handed out by host-local IPAM, the bridge as the pods' gateway with a default route,
// masquerading of traffic that leaves the pod network, and host ports through portmap. Loopback in
// each pod is set up by containerd itself (with the loopback plugin), so no separate conf is needed.
//
// podCIDR is the node's slice of the cluster's pod CIDR, from its Node object's spec.podCIDR (the
// controller-manager allocates it); the file can only be written once that is known.
func (r *Renderer) CNIConfig(podCIDR string, o CNIOptions) (File, error) {
	p, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return File{}, fmt.Errorf("render CNI config: node podCIDR %q: %w", podCIDR, err)
	}
	p = p.Masked()
	if !r.podCIDR.Contains(p.Addr()) || p.Bits() < r.podCIDR.Bits() {
		return File{}, fmt.Errorf("render CNI config: node podCIDR %s is not inside the cluster's pod CIDR %s", p, r.podCIDR)
	}
	defaultRoute := "0.0.0.0/0"
	if p.Addr().Is6() {
		defaultRoute = "::/0"
	}
	plugins := []any{bridgeConf{
		Type:        "bridge",
		Bridge:      CNIBridge,
		IsGateway:   true,
		IPMasq:      !o.NoMasquerade && !o.ClusterMasquerade,
		HairpinMode: true, // a pod can reach itself through its own Service
		MTU:         o.MTU,
		IPAM: hostLocal{
			Type:    "host-local",
			Ranges:  [][]ipamRange{{{Subnet: p.String()}}},
			Routes:  []ipamRoute{{Dst: defaultRoute}},
			DataDir: r.layout.CNIState(),
		},
	}}
	if !o.NoMasquerade {
		plugins = append(plugins, portmapConf{
			Type:         "portmap",
			Capabilities: map[string]bool{"portMappings": true},
			SNAT:         true,
		})
	}
	data, err := json.MarshalIndent(cniConfList{CNIVersion: "1.0.0", Name: "cairn", Plugins: plugins}, "", "  ")
	if err != nil {
		return File{}, fmt.Errorf("encode CNI config: %w", err)
	}
	return File{Path: r.layout.CNIConf(), Data: append(data, '\n'), Mode: modePublic}, nil
}
