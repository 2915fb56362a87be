package kube

import (
	"fmt"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// KubeletHealthzPort is the kubelet's health endpoint on loopback: http://127.0.0.1:10248/healthz.
const KubeletHealthzPort = 10248

// resolvConfInKubelet is where the kubelet container sees the node's resolver file (mounted from
// Layout.ResolvConf): pods with dnsPolicy Default get it, pods with ClusterFirst get its search path.
const resolvConfInKubelet = "/etc/resolv.conf"

// KubeletOptions are the node-level choices the machine config does not make.
type KubeletOptions struct {
	// AllowCgroupV1 lets the kubelet start on a cgroup v1 host (failCgroupV1: false). Only sandbox mode on
	// this machine's hybrid cgroup host needs it; Cairn's own image runs cgroup v2.
	AllowCgroupV1 bool
	// Bootstrap is the worker variant: the kubelet starts with bootstrap-kubelet.conf (the bootstrap
	// token), asks for its client certificate through a CSR and writes kubelet.conf itself.
	Bootstrap bool
}

// KubeletConfiguration is the part of kubelet.config.k8s.io/v1beta1 KubeletConfiguration that Cairn
// sets; the kubelet defaults the rest. It is a local type rather than k8s.io/kubelet's because that
// package links component-base's logging and metrics into machined (6.5 MB, measured) for one file;
// the tests decode the output strictly into the upstream type, so a field the kubelet would not know
// fails there.
type KubeletConfiguration struct {
	APIVersion               string                `json:"apiVersion"`
	Kind                     string                `json:"kind"`
	StaticPodPath            string                `json:"staticPodPath"`
	PodLogsDir               string                `json:"podLogsDir"`
	Authentication           KubeletAuthentication `json:"authentication"`
	Authorization            KubeletAuthorization  `json:"authorization"`
	ClusterDNS               []string              `json:"clusterDNS"`
	ClusterDomain            string                `json:"clusterDomain"`
	RotateCertificates       bool                  `json:"rotateCertificates"`
	ServerTLSBootstrap       bool                  `json:"serverTLSBootstrap"`
	HealthzBindAddress       string                `json:"healthzBindAddress"`
	HealthzPort              int32                 `json:"healthzPort"`
	ResolvConf               string                `json:"resolvConf"`
	CgroupDriver             string                `json:"cgroupDriver"`
	FailCgroupV1             bool                  `json:"failCgroupV1"`
	ContainerRuntimeEndpoint string                `json:"containerRuntimeEndpoint"`
	VolumePluginDir          string                `json:"volumePluginDir"`
	MaxPods                  int32                 `json:"maxPods,omitempty"`
	SerializeImagePulls      bool                  `json:"serializeImagePulls"`
	MaxParallelImagePulls    int32                 `json:"maxParallelImagePulls"`
	RegisterWithTaints       []corev1.Taint        `json:"registerWithTaints,omitempty"`
}

// KubeletAuthentication is how the kubelet's API authenticates callers.
type KubeletAuthentication struct {
	X509      KubeletX509   `json:"x509"`
	Webhook   KubeletSwitch `json:"webhook"`
	Anonymous KubeletSwitch `json:"anonymous"`
}

// KubeletX509 names the CA that signs the clients of the kubelet's API (kube-apiserver's).
type KubeletX509 struct {
	ClientCAFile string `json:"clientCAFile"`
}

// KubeletSwitch turns an authenticator on or off.
type KubeletSwitch struct {
	Enabled bool `json:"enabled"`
}

// KubeletAuthorization is how the kubelet's API authorizes callers.
type KubeletAuthorization struct {
	Mode string `json:"mode"`
}

// KubeletConfiguration is the kubelet's config. Settings the kubelet needs to run without systemd in a
// container: the cgroupfs driver, paths through paths.Paths (the kubelet sees them at the host's
// place), no graceful node shutdown (it needs logind; its default is off).
func (r *Renderer) KubeletConfiguration(o KubeletOptions) *KubeletConfiguration {
	return &KubeletConfiguration{
		APIVersion:    "kubelet.config.k8s.io/v1beta1",
		Kind:          "KubeletConfiguration",
		StaticPodPath: r.layout.Manifests(),
		PodLogsDir:    r.layout.PodLogs(),
		Authentication: KubeletAuthentication{
			X509:      KubeletX509{ClientCAFile: r.layout.PKIFile(CACert)},
			Webhook:   KubeletSwitch{Enabled: true},
			Anonymous: KubeletSwitch{Enabled: false},
		},
		Authorization:      KubeletAuthorization{Mode: "Webhook"},
		ClusterDNS:         []string{r.ClusterDNSIP().String()},
		ClusterDomain:      r.dnsDomain,
		RotateCertificates: true,
		// The kubelet asks the cluster for its serving certificate and renews it the same way; a control
		// plane's machined approves it for the node's own name and addresses (workload.approveServingCSRs).
		ServerTLSBootstrap:       true,
		HealthzBindAddress:       "127.0.0.1",
		HealthzPort:              KubeletHealthzPort,
		ResolvConf:               resolvConfInKubelet,
		CgroupDriver:             "cgroupfs",
		FailCgroupV1:             !o.AllowCgroupV1,
		ContainerRuntimeEndpoint: "unix://" + r.layout.ContainerdSocket(),
		// Under the kubelet's directory, so a FlexVolume driver survives a reboot; the default is on the
		// read-only root.
		VolumePluginDir: filepath.Join(r.layout.KubeletDir(), "volumeplugins"),
		MaxPods:         r.cfg.Machine.Kubelet.MaxPods,
		// Pulls run side by side, a few at a time. With the kubelet's default of one at a time, a pull
		// that cannot succeed (an unreachable registry: each attempt waits out DNS and connect timeouts)
		// holds every other pod's pull behind it for minutes; the conformance suite's deliberately failing
		// pulls kept an imported image's pull waiting three and a half minutes, failing a test.
		SerializeImagePulls:   false,
		MaxParallelImagePulls: maxParallelImagePulls,
		// The config's taints are on the Node from its registration, before any pod can land there; from
		// then on a control plane keeps them (workload/nodespec.go), since a kubelet may not change them.
		RegisterWithTaints: r.taints(),
	}
}

// taints are the machine config's node taints as the Node carries them.
func (r *Renderer) taints() []corev1.Taint {
	var out []corev1.Taint
	for _, t := range r.cfg.Machine.NodeTaints {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return out
}

// maxParallelImagePulls bounds the side-by-side pulls, so a burst of new pods does not saturate the
// node's link or its disk with unpacking.
const maxParallelImagePulls = 4

// KubeletConfig is the kubelet's config file at /var/lib/kubelet/config.yaml.
func (r *Renderer) KubeletConfig(o KubeletOptions) (File, error) {
	data, err := yaml.Marshal(r.KubeletConfiguration(o))
	if err != nil {
		return File{}, fmt.Errorf("encode kubelet config: %w", err)
	}
	return File{Path: r.layout.KubeletConfig(), Data: data, Mode: modePublic}, nil
}

// KubeletArgs are the kubelet's flags (without the binary): what the config file cannot say, then
// machine.kubelet.extraArgs, each overriding a flag of the same name.
func (r *Renderer) KubeletArgs(o KubeletOptions) []string {
	flags := []arg{
		{"config", r.layout.KubeletConfig()},
		{"kubeconfig", r.layout.KubernetesFile(KubeletConf)},
		{"hostname-override", r.node.Name},
		{"node-ip", r.primary.String()},
		// The kubelet hands its paths to containerd, which resolves them on the host: in sandbox mode both
		// must agree on where the root directory is.
		{"root-dir", r.layout.KubeletDir()},
		// Its default is /var/lib/kubelet/pki whatever root-dir says: named, it follows root-dir in
		// sandbox mode too, where machined seeds the control plane's client pair (workload/kubeletcert.go).
		{"cert-dir", r.layout.KubeletCertDir()},
	}
	if o.Bootstrap {
		flags = append(flags, arg{"bootstrap-kubeconfig", r.layout.KubernetesFile(BootstrapKubeletConf)})
	}
	return command("", flags, r.cfg.Machine.Kubelet.ExtraArgs)[1:]
}

// WorkerFiles are what a worker's kubelet needs before it can bootstrap: the cluster CA (the
// kubelet's client CA, from the join ticket) and the bootstrap kubeconfig with the token. kubelet.conf
// is written by the kubelet once its CSR is approved.
func (r *Renderer) WorkerFiles(caCert []byte, token string) (Files, error) {
	bootstrap, err := r.BootstrapKubeconfig(caCert, token)
	if err != nil {
		return nil, err
	}
	return Files{
		{Path: r.layout.PKIFile(CACert), Data: caCert, Mode: modePublic},
		{Path: r.layout.KubernetesFile(BootstrapKubeletConf), Data: bootstrap, Mode: modeSecret},
	}.sorted(), nil
}

// KubeletHealthzURL is where the supervisor checks the kubelet's health.
func KubeletHealthzURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(KubeletHealthzPort) + "/healthz"
}
