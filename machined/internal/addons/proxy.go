package addons

import (
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/cairn-os/cairn/machined/internal/kube"
)

const (
	kubeProxyName = "kube-proxy"
	// kubeProxyBinary is the kube-proxy entry of the bundle's multi-call kube binary (it dispatches on
	// the name it was started as).
	kubeProxyBinary = "/usr/local/bin/kube-proxy"
	// kubeProxyModeEnv tells the kube-proxy image's kube-proxy the mode: in nftables mode it lists the
	// node's nftables chains once and, when no iptables-mode rules are there to remove, hides iptables
	// from itself before its start-up clean-up of them, which is otherwise some forty iptables runs
	// (image/bundle/kube/proxyenv says more). An image without that code ignores it.
	kubeProxyModeEnv = "CAIRN_KUBE_PROXY_MODE"
	// kubeProxyConfigDir is where the kube-proxy ConfigMap is mounted in the container.
	kubeProxyConfigDir = "/var/lib/kube-proxy"
	// kube-proxy's ConfigMap keys, kubeadm's names.
	kubeProxyConfigKey     = "config.conf"
	kubeProxyKubeconfigKey = "kubeconfig.conf"
	// nodeProxierRole is the built-in cluster role with what kube-proxy reads and writes.
	nodeProxierRole = "system:node-proxier"
	// Every pod's service account credentials, mounted by the kubelet.
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// KubeProxyHealthz is where kube-proxy answers /healthz on its node: its default healthzBindAddress
	// (0.0.0.0:10256), which kubeProxyConfig leaves as it is. Health reads it there.
	KubeProxyHealthz = "http://127.0.0.1:10256/healthz"
)

var kubeProxyLabels = map[string]string{"k8s-app": kubeProxyName}

// kubeProxyConfiguration is the part of kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration that
// Cairn sets; kube-proxy defaults the rest. It is a local type rather than k8s.io/kube-proxy's because
// that package links component-base's feature gates, logging and metrics registry into machined (30
// more packages and 0.6 MB, measured) for one file, and because the upstream type writes every field
// it has, zero or not; the tests decode the output strictly into the upstream type, so a field kube-proxy
// would not know fails there.
type kubeProxyConfiguration struct {
	APIVersion       string                    `json:"apiVersion"`
	Kind             string                    `json:"kind"`
	ClientConnection kubeProxyClientConnection `json:"clientConnection"`
	ClusterCIDR      string                    `json:"clusterCIDR"`
	Mode             string                    `json:"mode"`
	Conntrack        kubeProxyConntrack        `json:"conntrack"`
}

type kubeProxyClientConnection struct {
	Kubeconfig string `json:"kubeconfig"`
}

// kubeProxyConntrack: a zero maximum or timeout tells kube-proxy to leave the kernel's value alone.
type kubeProxyConntrack struct {
	MaxPerCore            *int32           `json:"maxPerCore"`
	TCPEstablishedTimeout *metav1.Duration `json:"tcpEstablishedTimeout"`
	TCPCloseWaitTimeout   *metav1.Duration `json:"tcpCloseWaitTimeout"`
}

// kubeProxyConfig is kube-proxy's config file.
//
// The conntrack settings are zero, so kube-proxy changes no conntrack sysctl: the table size and TCP
// timeouts are the kernel's (kind does the same). nf_conntrack_max and the conntrack hash size are one
// value for the whole host, and sandbox mode runs its nodes in network namespaces of a shared host, where
// the write fails and kube-proxy exits; on a Cairn node the kernel's defaults are sized for its memory anyway.
//
// metricsBindAddress keeps kube-proxy's default, 127.0.0.1:10249 (as kubeadm does): the metrics are
// unauthenticated and kube-proxy runs on the host network, so any other address would publish them to
// the node's network.
func kubeProxyConfig(o Options) kubeProxyConfiguration {
	zero := int32(0)
	return kubeProxyConfiguration{
		APIVersion:       "kubeproxy.config.k8s.io/v1alpha1",
		Kind:             "KubeProxyConfiguration",
		ClientConnection: kubeProxyClientConnection{Kubeconfig: kubeProxyConfigDir + "/" + kubeProxyKubeconfigKey},
		// Traffic from outside this range to a Service is masqueraded; pods are inside it.
		ClusterCIDR: o.PodCIDR.Masked().String(),
		Mode:        o.Proxy.ModeOrDefault(),
		Conntrack: kubeProxyConntrack{
			MaxPerCore:            &zero,
			TCPEstablishedTimeout: &metav1.Duration{},
			TCPCloseWaitTimeout:   &metav1.Duration{},
		},
	}
}

// kubeProxyKubeconfig points kube-proxy at the cluster endpoint with its own service account token (the
// kubelet rotates it; client-go rereads the file) and the cluster CA the kubelet mounts beside it. Not
// the kubernetes Service: kube-proxy is what makes Services work.
func kubeProxyKubeconfig(o Options) clientcmdv1.Config {
	const name = "default"
	return clientcmdv1.Config{
		Kind: "Config", APIVersion: "v1",
		Clusters: []clientcmdv1.NamedCluster{{Name: name, Cluster: clientcmdv1.Cluster{
			Server:               o.server(),
			CertificateAuthority: serviceAccountDir + "/ca.crt",
		}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: name, AuthInfo: clientcmdv1.AuthInfo{
			TokenFile: serviceAccountDir + "/token",
		}}},
		Contexts: []clientcmdv1.NamedContext{{Name: name, Context: clientcmdv1.Context{
			Cluster: name, AuthInfo: name, Namespace: "default",
		}}},
		CurrentContext: name,
	}
}

// kubeProxyCommand is kube-proxy's command line: the config file and the node name, then
// cluster.proxy.extraArgs sorted by name, each replacing a flag of the same name in place.
//
// With --config, kube-proxy reads only the logging flags (-v, --vmodule, ...) and --hostname-override
// from its command line and ignores the rest, so extraArgs is for those; settings of the config file
// belong in typed fields of the machine config.
func kubeProxyCommand(extra map[string]string) []string {
	defaults := []struct{ name, value string }{
		{"config", kubeProxyConfigDir + "/" + kubeProxyConfigKey},
		// The Node's name, which may differ from the hostname kube-proxy would use by default.
		{"hostname-override", "$(NODE_NAME)"},
	}
	cmd := []string{kubeProxyBinary}
	seen := map[string]bool{}
	for _, f := range defaults {
		seen[f.name] = true
		if v, ok := extra[f.name]; ok {
			f.value = v
		}
		cmd = append(cmd, "--"+f.name+"="+f.value)
	}
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		if !seen[name] {
			cmd = append(cmd, "--"+name+"="+extra[name])
		}
	}
	return cmd
}

// kubeProxy renders kube-proxy as kubeadm does: a DaemonSet on the host network of every node, with its
// config in a ConfigMap and the built-in system:node-proxier role.
func kubeProxy(o Options) ([]kube.Object, error) {
	cfg, err := yaml.Marshal(kubeProxyConfig(o))
	if err != nil {
		return nil, fmt.Errorf("render kube-proxy: encode its config: %w", err)
	}
	kc, err := yaml.Marshal(kubeProxyKubeconfig(o))
	if err != nil {
		return nil, fmt.Errorf("render kube-proxy: encode its kubeconfig: %w", err)
	}
	cm := configMap(kubeProxyName, kubeProxyLabels, map[string]string{
		kubeProxyConfigKey:     string(cfg),
		kubeProxyKubeconfigKey: string(kc),
	})

	privileged := true
	container := corev1.Container{
		Name:            kubeProxyName,
		Image:           o.Images.KubeProxy,
		ImagePullPolicy: pullPolicy,
		Command:         kubeProxyCommand(o.Proxy.ExtraArgs),
		Env: []corev1.EnvVar{
			fieldEnv("NODE_NAME", "spec.nodeName"),
			{Name: kubeProxyModeEnv, Value: o.Proxy.ModeOrDefault()},
		},
		// It writes the node's nftables or iptables rules and sysctls.
		SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
		// A request makes it Burstable. Without one it was BestEffort, whose pods share a CPU weight of 1
		// on the node: an emulated control plane keeps its CPUs busy with nothing to do, and there
		// kube-proxy waited for CPU for over ten minutes, so no Service answered on either node.
		Resources: corev1.ResourceRequirements{Requests: quantities("100m", "30Mi")},
		VolumeMounts: []corev1.VolumeMount{
			{Name: kubeProxyName, MountPath: kubeProxyConfigDir},
			{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
			{Name: "lib-modules", MountPath: "/lib/modules", ReadOnly: true},
		},
	}
	hostsMounts, hostsVolumes := etcHosts(o.HostPaths)
	container.VolumeMounts = append(container.VolumeMounts, hostsMounts...)
	ds := &appsv1.DaemonSet{
		TypeMeta:   typeDaemonSet,
		ObjectMeta: objectMeta(KubeProxyDaemonSet, kubeProxyLabels),
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: kubeProxyLabels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: kubeProxyLabels},
				Spec: corev1.PodSpec{
					PriorityClassName:  systemNodeCritical,
					HostNetwork:        true,
					ServiceAccountName: kubeProxyName,
					NodeSelector:       linuxOnly,
					// Every node, whatever its taints: without kube-proxy no pod on it reaches a Service.
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{container},
					Volumes: append([]corev1.Volume{
						configMapVolume(kubeProxyName, cm.Name),
						xtablesLock(o.HostPaths.XtablesLock),
						hostPathVolume("lib-modules", o.HostPaths.LibModules, nil),
					}, hostsVolumes...),
				},
			},
		},
	}
	return wrap(
		serviceAccount(kubeProxyName, kubeProxyLabels),
		clusterRoleBinding("cairn:node-proxier", nodeProxierRole, kubeProxyName, kubeProxyLabels),
		cm,
		ds,
	)
}
