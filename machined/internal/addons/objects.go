package addons

import (
	"fmt"
	"maps"

	"github.com/cairn-os/cairn/machined/internal/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// pullPolicy is IfNotPresent, as upstream's manifests have it: the bundled images are always present, so
// nothing is pulled, and an image the user names instead can still come from a registry configured in
// the machine config. (Static pods use Never: they must start before any registry could be reached.)
const pullPolicy = corev1.PullIfNotPresent

// Priority classes the API server creates; only kube-system pods may use them.
const (
	systemNodeCritical    = "system-node-critical"
	systemClusterCritical = "system-cluster-critical"
)

// linuxOnly keeps the add-ons off any non-Linux node a user might join.
var linuxOnly = map[string]string{corev1.LabelOSStable: "linux"}

var (
	typeServiceAccount     = metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}
	typeConfigMap          = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	typeService            = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	typeClusterRole        = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"}
	typeClusterRoleBinding = metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"}
	typeDaemonSet          = metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "DaemonSet"}
	typeDeployment         = metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"}
)

// labels are an object's component labels plus the managed-by label. Pod templates and selectors carry
// only the component labels: the pods are the workload's, and a selector can never change once applied.
func labels(component map[string]string) map[string]string {
	l := map[string]string{ManagedByLabel: ManagedByValue}
	maps.Copy(l, component)
	return l
}

// objectMeta is a namespaced object's metadata.
func objectMeta(name string, component map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: labels(component)}
}

// clusterMeta is a cluster-scoped object's metadata.
func clusterMeta(name string, component map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: labels(component)}
}

func serviceAccount(name string, component map[string]string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{TypeMeta: typeServiceAccount, ObjectMeta: objectMeta(name, component)}
}

func clusterRole(name string, component map[string]string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{TypeMeta: typeClusterRole, ObjectMeta: clusterMeta(name, component), Rules: rules}
}

// clusterRoleBinding grants the cluster role to the add-on's ServiceAccount.
func clusterRoleBinding(name, role, account string, component map[string]string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   typeClusterRoleBinding,
		ObjectMeta: clusterMeta(name, component),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: Namespace}},
	}
}

func configMap(name string, component map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: typeConfigMap, ObjectMeta: objectMeta(name, component), Data: data}
}

func configMapVolume(name, configMap string, items ...corev1.KeyToPath) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
		Items:                items,
	}}}
}

// hostPathVolume is a host path; typ nil means unchecked (containerd creates a missing directory).
func hostPathVolume(name, path string, typ *corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: path, Type: typ},
	}}
}

// xtablesLock is the lock file every iptables program on the node takes; a container that runs them
// must share the host's, or its rules and the host's could be written at the same time. FileOrCreate:
// the first add-on to start creates it.
func xtablesLock(hostPath string) corev1.Volume {
	t := corev1.HostPathFileOrCreate
	return hostPathVolume("xtables-lock", hostPath, &t)
}

// etcHosts mounts the node's /etc/hosts, read-only, when HostPaths.EtcHosts names it: machined rewrites
// it in place, so the pod sees a control plane's new address as soon as the node does. File: the
// pod must not start with an empty one in its place.
func etcHosts(hp HostPaths) ([]corev1.VolumeMount, []corev1.Volume) {
	if hp.EtcHosts == "" {
		return nil, nil
	}
	t := corev1.HostPathFile
	return []corev1.VolumeMount{{Name: "etc-hosts", MountPath: "/etc/hosts", ReadOnly: true}},
		[]corev1.Volume{hostPathVolume("etc-hosts", hp.EtcHosts, &t)}
}

// apiServerEnv points a pod's in-cluster client at the cluster endpoint instead of the kubernetes
// Service the kubelet puts in these two variables (a container's own value wins): the Service address
// works only once kube-proxy has written its rules, and pods on other nodes only once flannel runs. The
// client still takes the service account's token and CA, and the API server's certificate names the
// endpoint.
func apiServerEnv(ep endpoint) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: ep.host},
		{Name: "KUBERNETES_SERVICE_PORT", Value: ep.port},
	}
}

// fieldEnv is an environment variable from the downward API.
func fieldEnv(name, fieldPath string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fieldPath},
	}}
}

// quantities builds a resource list; an empty value leaves the resource out.
func quantities(cpu, memory string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return l
}

// resources maps a kind to its API path prefix and resource name: the collection path kube.Object needs.
var resources = map[string]struct {
	prefix, resource string
	namespaced       bool
}{
	"ServiceAccount":     {"/api/v1", "serviceaccounts", true},
	"ConfigMap":          {"/api/v1", "configmaps", true},
	"Service":            {"/api/v1", "services", true},
	"ClusterRole":        {"/apis/rbac.authorization.k8s.io/v1", "clusterroles", false},
	"ClusterRoleBinding": {"/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", false},
	"DaemonSet":          {"/apis/apps/v1", "daemonsets", true},
	"Deployment":         {"/apis/apps/v1", "deployments", true},
}

// wrap gives each object its collection path, from its TypeMeta, namespace and name.
func wrap(objs ...runtime.Object) ([]kube.Object, error) {
	out := make([]kube.Object, 0, len(objs))
	for _, obj := range objs {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("render add-ons: %s: %w", kind, err)
		}
		r, ok := resources[kind]
		if !ok {
			return nil, fmt.Errorf("render add-ons: no API path for kind %q (%s)", kind, m.GetName())
		}
		if r.namespaced != (m.GetNamespace() != "") {
			return nil, fmt.Errorf("render add-ons: %s %s: namespace %q is wrong for its kind", kind, m.GetName(), m.GetNamespace())
		}
		p := r.prefix
		if r.namespaced {
			p += "/namespaces/" + m.GetNamespace()
		}
		out = append(out, kube.Object{Path: p + "/" + r.resource, Name: m.GetName(), Object: obj})
	}
	return out, nil
}

// fastStart is the startup probe of an add-on whose readiness others wait for (CoreDNS, flannel): the same
// check as its readiness probe, every second until it first passes. The kubelet probes readiness once as
// the container starts, which an add-on that still syncs with the API fails, and then only every period
// (10 s), so its first Ready came up to ten seconds after it was; a passing startup probe makes the kubelet
// probe readiness at once. It runs only until it passes, so a running add-on costs no more probes. Five
// minutes to pass, not less: under emulation an add-on's first sync with a busy API server is slow, and a
// startup probe that gives up kills the container.
func fastStart(h corev1.ProbeHandler) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: h, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 300}
}
