package addons

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-os/cairn/machined/internal/kube"
)

const (
	flannelName       = "flannel"
	flannelConfigMap  = "kube-flannel-cfg"
	flannelConfigDir  = "/etc/kube-flannel/"
	flannelNetConfKey = "net-conf.json"
	flanneldBinary    = "/opt/bin/flanneld"
	// flannelHealthzPort serves /healthz and /readyz on the node (host network), as upstream's DaemonSet.
	flannelHealthzPort = 8081
)

// flannelLabels are upstream's; app=flannel is the DaemonSet's selector.
var flannelLabels = map[string]string{"app": flannelName, "k8s-app": flannelName, "tier": "node"}

// flannelSelector selects flannel's pods, upstream's selector (it can never change once applied).
var flannelSelector = map[string]string{"app": flannelName}

// flannelNetConf is flannel's net-conf.json (its subnet.Config): the cluster's pod network, which with
// --kube-subnet-mgr only has to contain each Node's spec.podCIDR (the controller-manager allocates
// those, and they are the leases flannel routes).
type flannelNetConf struct {
	Network     string `json:",omitempty"`
	IPv6Network string `json:",omitempty"`
	// EnableIPv4 defaults to true in flannel; it is written only to turn it off for an IPv6 pod network.
	EnableIPv4 *bool `json:",omitempty"`
	EnableIPv6 bool  `json:",omitempty"`
	// EnableNFTables: flannel masquerades with nft, as kube-proxy programs Services (and without the
	// br_netfilter check that its iptables mode makes).
	EnableNFTables bool
	Backend        flannelBackend
}

type flannelBackend struct {
	Type string
}

func flannelNetConfJSON(o Options) (string, error) {
	c := flannelNetConf{EnableNFTables: true, Backend: flannelBackend{Type: "vxlan"}}
	if p := o.PodCIDR.Masked(); p.Addr().Is4() {
		c.Network = p.String()
	} else {
		off := false
		c.IPv6Network, c.EnableIPv4, c.EnableIPv6 = p.String(), &off, true
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", fmt.Errorf("render flannel: encode %s: %w", flannelNetConfKey, err)
	}
	return string(data) + "\n", nil
}

// flannel renders upstream's kube-flannel DaemonSet (vxlan, --kube-subnet-mgr), in kube-system rather
// than its own namespace, and without its install-cni init containers: Cairn's image has no flannel CNI
// plugin, and needs none. machined writes the node's bridge conflist on the Node's spec.podCIDR, which
// is the very lease flannel takes with --kube-subnet-mgr; flannel only carries traffic between the
// nodes' pod ranges (a vxlan device and a route per node) and masquerades traffic leaving the cluster.
func flannel(o Options, ep endpoint) ([]kube.Object, error) {
	netConf, err := flannelNetConfJSON(o)
	if err != nil {
		return nil, err
	}
	cm := configMap(flannelConfigMap, flannelLabels, map[string]string{flannelNetConfKey: netConf})

	// Upstream's rules: its node (and the others' leases), the annotations it writes on its own
	// Node, and its pod (to find the node when NODE_NAME is not set).
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	}

	ds := &appsv1.DaemonSet{
		TypeMeta:   typeDaemonSet,
		ObjectMeta: objectMeta(FlannelDaemonSet, flannelLabels),
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: flannelSelector},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: flannelLabels},
				Spec:       flannelPod(o, ep),
			},
		},
	}
	return wrap(
		serviceAccount(flannelName, flannelLabels),
		clusterRole(flannelName, flannelLabels, rules),
		clusterRoleBinding(flannelName, flannelName, flannelName, flannelLabels),
		cm,
		ds,
	)
}

func flannelPod(o Options, ep endpoint) corev1.PodSpec {
	privileged := false
	healthz := intstr.FromString("healthz")
	container := corev1.Container{
		Name:            "kube-flannel",
		Image:           o.Images.Flannel,
		ImagePullPolicy: pullPolicy,
		Command:         []string{flanneldBinary},
		Args: []string{
			"--ip-masq",
			"--kube-subnet-mgr",
			// The node's InternalIP (the kubelet's --node-ip) carries the vxlan traffic, not the interface
			// of the default route: QEMU nodes have a NAT interface with the same 10.0.2.15 on every node.
			"--iface=$(NODE_IP)",
			fmt.Sprintf("--healthz-port=%d", flannelHealthzPort),
		},
		Env: append([]corev1.EnvVar{
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			// Saves flannel looking its pod up to learn the node's name.
			fieldEnv("NODE_NAME", "spec.nodeName"),
			fieldEnv("NODE_IP", "status.hostIP"),
			{Name: "EVENT_QUEUE_DEPTH", Value: "5000"},
			{Name: "CONT_WHEN_CACHE_NOT_READY", Value: "false"},
		}, apiServerEnv(ep)...),
		Ports: []corev1.ContainerPort{{Name: "healthz", ContainerPort: flannelHealthzPort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: healthz}},
			InitialDelaySeconds: 10,
			PeriodSeconds:       30,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: healthz}},
			PeriodSeconds: 10,
		},
		// No initial delay on the readiness probe: the startup probe holds it back, and the kubelet's
		// first readiness probe, just as the startup probe passes, would fall inside one.
		StartupProbe: fastStart(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: healthz}}),
		Resources:    corev1.ResourceRequirements{Requests: quantities("100m", "50Mi")},
		// Upstream's: not privileged. NET_ADMIN is what the vxlan device, routes, neighbour entries and
		// nft (nftables mode runs the nft program) need; NET_RAW is upstream's too.
		SecurityContext: &corev1.SecurityContext{
			Privileged:   &privileged,
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "run", MountPath: "/run/flannel"},
			{Name: "flannel-cfg", MountPath: flannelConfigDir},
			{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
		},
	}
	hostsMounts, hostsVolumes := etcHosts(o.HostPaths)
	container.VolumeMounts = append(container.VolumeMounts, hostsMounts...)
	return corev1.PodSpec{
		PriorityClassName:  systemNodeCritical,
		HostNetwork:        true,
		ServiceAccountName: flannelName,
		NodeSelector:       linuxOnly,
		// Every taint, not only NoSchedule as upstream: the pod network is part of the node, and a pod that
		// tolerates a NoExecute taint and stays would lose its network if flannel were evicted.
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Containers:  []corev1.Container{container},
		Volumes: append([]corev1.Volume{
			// subnet.env, flannel's record of its lease; unchecked, so containerd creates the directory.
			hostPathVolume("run", o.HostPaths.FlannelRun, nil),
			configMapVolume("flannel-cfg", flannelConfigMap),
			// Upstream mounts it for iptables mode; kept so flannel and kube-proxy share one lock whatever
			// mode either runs.
			xtablesLock(o.HostPaths.XtablesLock),
		}, hostsVolumes...),
	}
}
