package kube

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Static pod (component) names; each is also the manifest's file name and the pod's container name.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
)

// systemNodeCritical is the priority of the system-node-critical class. Static pods never pass through
// the Priority admission plugin on this node, so the value is set alongside the class name.
const systemNodeCritical int32 = 2000001000

// arg is one --name=value of a component.
type arg struct{ name, value string }

// command is the component's command line: the typed settings sorted by name, each overridden in
// place by an extraArgs entry of the same name, then the remaining extraArgs sorted by name. A flag is
// never given twice, so what the user asked for is what the component sees.
func command(binary string, defaults []arg, extra map[string]string) []string {
	sort.SliceStable(defaults, func(i, j int) bool { return defaults[i].name < defaults[j].name })
	seen := make(map[string]bool, len(defaults))
	args := []string{binary}
	for _, f := range defaults {
		seen[f.name] = true
		if v, ok := extra[f.name]; ok {
			f.value = v
		}
		args = append(args, "--"+f.name+"="+f.value)
	}
	names := make([]string, 0, len(extra))
	for n := range extra {
		if !seen[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		args = append(args, "--"+n+"="+extra[n])
	}
	return args
}

// staticPod wraps one container in the pod every control-plane component shares: host network,
// system-node-critical, RuntimeDefault seccomp, labelled like kubeadm's so tools that look for
// component=kube-apiserver find it.
func staticPod(c corev1.Container, volumes []corev1.Volume) *corev1.Pod {
	c.ImagePullPolicy = corev1.PullNever // air-gapped: images are imported from the bundle
	prio := systemNodeCritical
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      c.Name,
			Namespace: metav1.NamespaceSystem,
			Labels:    map[string]string{"component": c.Name, "tier": "control-plane"},
		},
		Spec: corev1.PodSpec{
			Containers:        []corev1.Container{c},
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Priority:          &prio,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: volumes,
		},
	}
}

// hostMount is one hostPath volume and where the container sees it.
type hostMount struct {
	name, hostPath, mountPath string
	readOnly                  bool
	// typ is checked by the kubelet in its own mount namespace; only paths the kubelet container sees
	// (under /etc/kubernetes) get a type, the rest are unchecked and containerd creates missing
	// directories.
	typ *corev1.HostPathType
}

func volumes(mounts []hostMount) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var vms []corev1.VolumeMount
	for _, m := range mounts {
		vols = append(vols, corev1.Volume{
			Name:         m.name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.hostPath, Type: m.typ}},
		})
		vms = append(vms, corev1.VolumeMount{Name: m.name, MountPath: m.mountPath, ReadOnly: m.readOnly})
	}
	return vols, vms
}

func hostPathType(t corev1.HostPathType) *corev1.HostPathType { return &t }

// probe is an HTTP(S) GET probe; the timings follow kubeadm's, which are tuned for slow first starts.
type probe struct {
	host, path string
	port       int32
	scheme     corev1.URIScheme
}

func (p probe) get(initialDelay, timeout, failures, period int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: p.host, Path: p.path, Port: intstr.FromInt32(p.port), Scheme: p.scheme,
		}},
		InitialDelaySeconds: initialDelay,
		TimeoutSeconds:      timeout,
		FailureThreshold:    failures,
		PeriodSeconds:       period,
	}
}

func (p probe) liveness() *corev1.Probe { return p.get(10, 15, 8, 10) }

// readiness is only the API server's: no Service routes to a static pod, so readiness tells machined's
// health and the user, nothing else. Each probe is a new TLS connection and a full /readyz run;
// kubeadm's one a second made probes a third of an idle control plane's API requests (with the same for
// etcd and the scheduler, which have none now), so it runs every 10 s, from 10 s after a start (the API
// server has no startup probe to hold it back while it starts).
func (p probe) readiness() *corev1.Probe { return p.get(10, 15, 3, 10) }

// startup allows ten minutes for a first start (etcd's). kubeadm allows four, which real hardware never
// needs; under emulation a start took longer than that, and the kubelet killed the component every four
// minutes, so it never started.
func (p probe) startup() *corev1.Probe { return p.get(10, 15, 60, 10) }

// quickStartup allows the same ten minutes, asking every second from the start: the controller-manager's
// and the scheduler's. A pod is Ready only once its startup probe has passed; at kubeadm's 10 s delay and
// period, on a sandbox control plane whose components served within a second, theirs were Ready 17 s
// after their start, and `cairnctl health` waited for that. Until the component listens each try is a
// refused connection, and once one passes the kubelet stops asking, so the rate costs nothing after the
// start. Not etcd's: etcd starts before the API server, and the kubelet makes a static pod's mirror pod
// (the pod the API shows, which health reads) only when it syncs the pod with the API server up. Given
// this probe, etcd's passed 2 s after its start, before the API server answered, and its mirror pod came
// 85 s after its start, at the kubelet's periodic resync; with the 10 s delay it came after 7 s.
func (p probe) quickStartup() *corev1.Probe { return p.get(0, 15, 600, 1) }

func requests(cpu, memory string) corev1.ResourceRequirements {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	if memory != "" {
		rl[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return corev1.ResourceRequirements{Requests: rl}
}

// ManifestFile encodes a static pod as YAML at its place in the manifest directory.
func (r *Renderer) ManifestFile(pod *corev1.Pod) (File, error) {
	data, err := yaml.Marshal(pod)
	if err != nil {
		return File{}, fmt.Errorf("encode static pod %s: %w", pod.Name, err)
	}
	return File{Path: r.layout.Manifest(pod.Name), Data: data, Mode: modeSecret}, nil
}

// ControlPlaneManifests renders kube-apiserver, kube-controller-manager and kube-scheduler. etcd is
// rendered apart (EtcdManifest) because it may only be written once the ETCD volume is mounted.
func (r *Renderer) ControlPlaneManifests() (Files, error) {
	return r.manifests(r.APIServerPod(), r.ControllerManagerPod(), r.SchedulerPod())
}

// APIServerManifest renders kube-apiserver alone, and ControllerManifests the controller-manager and the
// scheduler: a node writes the second pair only once its API server answers /readyz. Until then they
// could do nothing but retry, and under emulation on two vCPUs their start (each is the whole kube
// binary's initialisation and informers) took CPU from the API server's own start, which every later
// step waits on.
func (r *Renderer) APIServerManifest() (Files, error) { return r.manifests(r.APIServerPod()) }

// ControllerManifests: see APIServerManifest.
func (r *Renderer) ControllerManifests() (Files, error) {
	return r.manifests(r.ControllerManagerPod(), r.SchedulerPod())
}

func (r *Renderer) manifests(pods ...*corev1.Pod) (Files, error) {
	var files Files
	for _, pod := range pods {
		f, err := r.ManifestFile(pod)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files.sorted(), nil
}

// inPKI is a PKI file's path inside a component's container.
func inPKI(name string) string { return containerPKIDir + "/" + name }
