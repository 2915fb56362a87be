package addons

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-os/cairn/machined/internal/kube"
)

const (
	coreDNSName      = "coredns"
	coreDNSRole      = "system:coredns" // kubeadm's name, so tools that look for it find it
	coreDNSConfigDir = "/etc/coredns"
	corefileKey      = "Corefile"
	// unprivilegedPortStart is the sysctl that lets CoreDNS, not root, bind dnsPort.
	unprivilegedPortStart = "net.ipv4.ip_unprivileged_port_start"
	// Ports inside the pod: DNS, metrics, and the health and ready plugins the probes ask.
	dnsPort       = 53
	metricsPort   = 9153
	livenessPort  = 8080
	readinessPort = 8181
)

// coreDNSLabels select the CoreDNS pods; k8s-app=kube-dns is what kubeadm and every tool expect.
var coreDNSLabels = map[string]string{"k8s-app": "kube-dns"}

// corefileFormat is kubeadm's Corefile at this version, %[1]s the cluster domain and %[2]d the metrics
// port: the cluster zone and the reverse zones from the API, the rest forwarded to the node's resolvers
// (the pods run with dnsPolicy Default, so /etc/resolv.conf is the node's). The cluster zone is kept out
// of the cache: the kubernetes plugin answers from its own watch, and a cached answer would outlive a
// Service's change. A format, not a text/template: that package's reflection on method names makes the
// linker keep every exported method of every type machined links (see containerd.withImageConfig).
const corefileFormat = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes %[1]s in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :%[2]d
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success %[1]s
       disable denial %[1]s
    }
    loop
    reload
    loadbalance
}
`

func renderCorefile(o Options) string {
	return fmt.Sprintf(corefileFormat, o.DNSDomain, metricsPort)
}

// coreDNS renders the cluster DNS as kubeadm does: a CoreDNS Deployment behind the kube-dns Service at
// the address the kubelets give pods as their nameserver. ep is the API server CoreDNS watches.
func coreDNS(o Options, ep endpoint) ([]kube.Object, error) {
	cm := configMap(coreDNSName, coreDNSLabels, map[string]string{corefileKey: renderCorefile(o)})

	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}

	replicas := o.coreDNSReplicas()
	maxUnavailable := intstr.FromInt32(1)
	deploy := &appsv1.Deployment{
		TypeMeta:   typeDeployment,
		ObjectMeta: objectMeta(CoreDNSDeployment, coreDNSLabels),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: coreDNSLabels},
			// One pod at a time, so DNS keeps answering through an update.
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: coreDNSLabels},
				Spec:       coreDNSPod(o, ep),
			},
		},
	}

	svc := &corev1.Service{
		TypeMeta: typeService,
		ObjectMeta: metav1.ObjectMeta{
			Name:      KubeDNSService,
			Namespace: Namespace,
			Labels: labels(map[string]string{
				"k8s-app":                       "kube-dns",
				"kubernetes.io/cluster-service": "true",
				"kubernetes.io/name":            "CoreDNS",
			}),
			Annotations: map[string]string{
				"prometheus.io/port":   fmt.Sprint(metricsPort),
				"prometheus.io/scrape": "true",
			},
		},
		Spec: corev1.ServiceSpec{
			// The kubelets' clusterDNS; fixed, not allocated, so it is known before the Service exists.
			ClusterIP: o.DNSServiceIP.String(),
			Selector:  coreDNSLabels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: dnsPort, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(dnsPort)},
				{Name: "dns-tcp", Port: dnsPort, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(dnsPort)},
				{Name: "metrics", Port: metricsPort, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(metricsPort)},
			},
		},
	}

	return wrap(
		serviceAccount(coreDNSName, coreDNSLabels),
		clusterRole(coreDNSRole, coreDNSLabels, rules),
		clusterRoleBinding(coreDNSRole, coreDNSRole, coreDNSName, coreDNSLabels),
		cm,
		svc,
		deploy,
	)
}

// coreDNSPod is kubeadm's CoreDNS pod, but for the way it reaches the API server.
//
// Its kubernetes plugin watches the API through the cluster endpoint, as flannel does, not through the
// kubernetes Service the kubelet would name: that address works only once kube-proxy on the node has
// written its rules, and CoreDNS is not ready until its watch has synced. On a node that starts, kube-proxy's
// own pod, start and first sync came after CoreDNS's start (2026-12-03: CoreDNS listed the Service
// address in vain for 11 s), and with the Service proxy off or broken CoreDNS would never be ready. The
// in-cluster client still takes the service account's token and CA; the endpoint's name is in the node's
// /etc/hosts, which is mounted for it.
//
// Replicas spread over nodes with kubeadm's preferred anti-affinity: with two replicas and two nodes each
// gets one, and a single node still runs both. No topologySpreadConstraint on top: for the few replicas
// DNS needs it would decide nothing the anti-affinity does not, and neither moves a pod that was placed
// before the other nodes joined (the scheduler's default spreading covers larger counts).
func coreDNSPod(o Options, ep endpoint) corev1.PodSpec {
	noEscalation, readOnlyRoot, nonRoot := false, true, true
	hostsMounts, hostsVolumes := etcHosts(o.HostPaths)
	container := corev1.Container{
		Name:            coreDNSName,
		Image:           o.Images.CoreDNS,
		ImagePullPolicy: pullPolicy,
		Args:            []string{"-conf", coreDNSConfigDir + "/" + corefileKey},
		Ports: []corev1.ContainerPort{
			{Name: "dns", ContainerPort: dnsPort, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", ContainerPort: dnsPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP},
			{Name: "liveness-probe", ContainerPort: livenessPort, Protocol: corev1.ProtocolTCP},
			{Name: "readiness-probe", ContainerPort: readinessPort, Protocol: corev1.ProtocolTCP},
		},
		Resources: corev1.ResourceRequirements{
			Requests: quantities("100m", "70Mi"),
			Limits:   quantities("", "170Mi"),
		},
		Env: apiServerEnv(ep),
		VolumeMounts: append([]corev1.VolumeMount{{Name: "config-volume", MountPath: coreDNSConfigDir, ReadOnly: true}},
			hostsMounts...),
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/health", Port: intstr.FromString("liveness-probe"), Scheme: corev1.URISchemeHTTP,
			}},
			InitialDelaySeconds: 60,
			TimeoutSeconds:      5,
			SuccessThreshold:    1,
			FailureThreshold:    5,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/ready", Port: intstr.FromString("readiness-probe"), Scheme: corev1.URISchemeHTTP,
			}},
		},
		StartupProbe: fastStart(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/ready", Port: intstr.FromString("readiness-probe"), Scheme: corev1.URISchemeHTTP,
		}}),
		// The image runs CoreDNS as 65532:65532 (numeric, like upstream's, so the kubelet can check
		// runAsNonRoot). Its binary is the shared multi-call kube binary, which carries no file
		// capability: port 53 is allowed by the pod's ip_unprivileged_port_start sysctl, so the
		// container needs no capability at all.
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &noEscalation,
			Capabilities: &corev1.Capabilities{
				Drop: []corev1.Capability{"ALL"},
			},
			ReadOnlyRootFilesystem: &readOnlyRoot,
			RunAsNonRoot:           &nonRoot,
		},
	}
	return corev1.PodSpec{
		PriorityClassName:  systemClusterCritical,
		ServiceAccountName: coreDNSName,
		NodeSelector:       linuxOnly,
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: "k8s-app", Operator: metav1.LabelSelectorOpIn, Values: []string{"kube-dns"},
					}}},
					TopologyKey: corev1.LabelHostname,
				},
			}},
		}},
		// Control-plane nodes too: a cluster of control planes only still has DNS.
		Tolerations: []corev1.Toleration{
			{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
			{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		},
		// The node's resolvers: CoreDNS is what ClusterFirst would point at.
		DNSPolicy: corev1.DNSDefault,
		// The runtime's default seccomp profile, as Cairn's static pods have (the kubelet's default is
		// Unconfined): CoreDNS makes no system call it blocks. Ports from 53 up are unprivileged in
		// the pod's network namespace (a safe sysctl, allowed by every kubelet since 1.22), so the
		// non-root CoreDNS binds :53. containerd's CRI would otherwise open every port
		// (enable_unprivileged_ports); this says what CoreDNS needs and no more.
		SecurityContext: &corev1.PodSecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			Sysctls:        []corev1.Sysctl{{Name: unprivilegedPortStart, Value: fmt.Sprint(dnsPort)}},
		},
		Containers: []corev1.Container{container},
		Volumes: append([]corev1.Volume{configMapVolume("config-volume", coreDNSName,
			corev1.KeyToPath{Key: corefileKey, Path: corefileKey})}, hostsVolumes...),
	}
}
