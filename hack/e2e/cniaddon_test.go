//go:build e2e

package e2e

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/hack/examples/helloimage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// addonSubnet is the pod subnet of hack/e2e/cniaddon's network.
var addonSubnet = netip.MustParsePrefix("172.30.99.0/24")

// checkAddonCNI installs a network add-on's CNI plugin on node i as Calico's or Cilium's installer
// does (a privileged host-network pod writes the plugin into /opt/cni/bin and its config into
// /etc/cni/net.d through hostPath volumes; /opt is read-only in Cairn's root image and EPHEMERAL's
// /var/opt on a node) and checks that containerd runs it for the next pod. Before it installs, the
// installer makes an IPIP link and an ipset and reads the raw tables as Calico's agent does: the kernel
// loads their modules on request through the node's modprobe, and the installer fails without them. The
// add-on's network config sorts before Cairn's, so new pods on that node get its network: this runs last
// on a cluster. The probe pod runs hello, which importHello brought in earlier.
func checkAddonCNI(t *testing.T, c *cluster, i int, kc string) {
	const ref = "example.local/cniaddon:v1"
	archive := imageArchive(t, "./hack/e2e/cniaddon", ref)
	mustCtl(t, 5*time.Minute, append(c.mtls(i), "image", "import", archive)...)

	node := c.Nodes[i].Name
	root, privileged := int64(0), true
	hostDir := corev1.HostPathDirectoryOrCreate
	installer := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "cni-addon-install", Namespace: "kube-system"},
		Spec: corev1.PodSpec{
			NodeName: node, HostNetwork: true, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "install", Image: ref, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{RunAsUser: &root, Privileged: &privileged},
				VolumeMounts:    []corev1.VolumeMount{{Name: "bin", MountPath: "/host/opt/cni/bin"}, {Name: "conf", MountPath: "/host/etc/cni/net.d"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "bin", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/opt/cni/bin", Type: &hostDir}}},
				{Name: "conf", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/cni/net.d", Type: &hostDir}}},
			},
		},
	}
	apply := func(p *corev1.Pod) {
		path := filepath.Join(t.TempDir(), p.Name+".json")
		writeJSONList(t, path, []any{p})
		kubectl(t, kc, "apply", "-f", path)
		kubectl(t, kc, "-n", p.Namespace, "wait", "--for=condition=Ready", "pod/"+p.Name, "--timeout=5m")
	}
	apply(installer)
	// Ready is its start: it has made its links and sets, and installed, once it says so (a failure
	// restarts it, and its log says what the kernel refused).
	waitKubectl(t, kc, 2*time.Minute, func(out string) bool { return strings.Contains(out, "installed cairn-e2e-net") },
		"-n", "kube-system", "logs", installer.Name)
	// The node's kernel log says what the kernel's module requests loaded, and for what.
	dmesg := mustCtl(t, time.Minute, append(c.mtls(i), "dmesg")...)
	for _, want := range []string{"modprobe rtnl-link-ipip: loaded", "modprobe ip_set_hash:ip: loaded",
		"modprobe iptable_raw: loaded", "modprobe ip6table_raw: loaded"} {
		if !strings.Contains(dmesg, want) {
			t.Errorf("cairnctl dmesg has no %q line", want)
		}
	}
	for _, l := range strings.Split(dmesg, "\n") {
		if strings.Contains(l, "modprobe ") {
			t.Logf("dmesg: %s", l)
		}
	}

	probe := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "cni-addon-probe", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: node, Tolerations: installer.Spec.Tolerations,
			Containers: []corev1.Container{{Name: "hello", Image: helloimage.Ref, ImagePullPolicy: corev1.PullNever}},
		},
	}
	apply(probe)
	var got corev1.Pod
	kubectlJSON(t, kc, &got, "-n", probe.Namespace, "get", "pod", probe.Name)
	ip, err := netip.ParseAddr(got.Status.PodIP)
	if err != nil || !addonSubnet.Contains(ip) {
		t.Errorf("pod %s after the add-on's install has address %q, want one of the add-on's %s", probe.Name, got.Status.PodIP, addonSubnet)
	}
}
