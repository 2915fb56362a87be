package addons

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/kube"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
)

// strictDecode decodes data into the external type addToScheme registers, the way kube-proxy and
// client-go load their files: field names match case-sensitively, and an unknown or repeated field is an
// error. A field the real component would not know fails here rather than on a node.
func strictDecode[T runtime.Object](t *testing.T, data string, addToScheme func(*runtime.Scheme) error) T {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer().Decode([]byte(data), nil, nil)
	if err != nil {
		t.Fatalf("strict decoding: %v\n%s", err, data)
	}
	v, ok := obj.(T)
	if !ok {
		t.Fatalf("decoded a %s (%T)", gvk, obj)
	}
	return v
}

// proxyConfig is the rendered config.conf as kube-proxy's own type.
func proxyConfig(t *testing.T, objs []kube.Object) *kubeproxyv1alpha1.KubeProxyConfiguration {
	t.Helper()
	return strictDecode[*kubeproxyv1alpha1.KubeProxyConfiguration](t,
		configData(t, objs, kubeProxyName, kubeProxyConfigKey), kubeproxyv1alpha1.AddToScheme)
}

func TestKubeProxyConfig(t *testing.T) {
	o := testOptions()
	c := proxyConfig(t, mustRender(t, o))
	if c.ClusterCIDR != o.PodCIDR.String() {
		t.Errorf("clusterCIDR %q, want the pod CIDR %s", c.ClusterCIDR, o.PodCIDR)
	}
	if c.Mode != config.ProxyNFTables {
		t.Errorf("mode %q, want nftables by default", c.Mode)
	}
	if want := "/var/lib/kube-proxy/kubeconfig.conf"; c.ClientConnection.Kubeconfig != want {
		t.Errorf("kubeconfig %q, want %q", c.ClientConnection.Kubeconfig, want)
	}
	// Zero, not unset: unset would take kube-proxy's defaults and write the host's conntrack sysctls.
	ct := c.Conntrack
	if ct.MaxPerCore == nil || *ct.MaxPerCore != 0 {
		t.Errorf("conntrack.maxPerCore %v, want 0", ct.MaxPerCore)
	}
	if ct.TCPEstablishedTimeout == nil || ct.TCPEstablishedTimeout.Duration != 0 ||
		ct.TCPCloseWaitTimeout == nil || ct.TCPCloseWaitTimeout.Duration != 0 {
		t.Errorf("conntrack TCP timeouts %v %v, want 0s", ct.TCPEstablishedTimeout, ct.TCPCloseWaitTimeout)
	}
	// Left to kube-proxy's default (127.0.0.1:10249).
	if c.MetricsBindAddress != "" {
		t.Errorf("metricsBindAddress %q is set", c.MetricsBindAddress)
	}
}

func TestKubeProxyClusterCIDRIsMasked(t *testing.T) {
	o := testOptions()
	o.PodCIDR = netip.MustParsePrefix("10.244.7.1/16")
	if c := proxyConfig(t, mustRender(t, o)); c.ClusterCIDR != "10.244.0.0/16" {
		t.Errorf("clusterCIDR %q", c.ClusterCIDR)
	}
}

func TestKubeProxyModes(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{"", config.ProxyNFTables},
		{config.ProxyNFTables, config.ProxyNFTables},
		{config.ProxyIPTables, config.ProxyIPTables},
	} {
		o := testOptions()
		o.Proxy.Mode = c.mode
		if got := proxyConfig(t, mustRender(t, o)).Mode; string(got) != c.want {
			t.Errorf("Proxy.Mode %q: rendered mode %q, want %q", c.mode, got, c.want)
		}
	}
}

func TestKubeProxyKubeconfig(t *testing.T) {
	o := testOptions()
	o.APIServer = "https://lb.demo.example:443/"
	kc := strictDecode[*clientcmdv1.Config](t, configData(t, mustRender(t, o), kubeProxyName, kubeProxyKubeconfigKey),
		clientcmdv1.AddToScheme)
	if len(kc.Clusters) != 1 || len(kc.AuthInfos) != 1 || len(kc.Contexts) != 1 {
		t.Fatalf("want one cluster, user and context: %+v", kc)
	}
	cl, user, ctx := kc.Clusters[0], kc.AuthInfos[0], kc.Contexts[0]
	if cl.Cluster.Server != "https://lb.demo.example:443" {
		t.Errorf("server %q", cl.Cluster.Server)
	}
	if cl.Cluster.CertificateAuthority != "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" {
		t.Errorf("CA %q", cl.Cluster.CertificateAuthority)
	}
	if user.AuthInfo.TokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("token file %q", user.AuthInfo.TokenFile)
	}
	if kc.CurrentContext != ctx.Name || ctx.Context.Cluster != cl.Name || ctx.Context.AuthInfo != user.Name {
		t.Errorf("the current context does not tie the cluster and the user together: %+v", kc)
	}
}

func TestKubeProxyCommand(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra map[string]string
		want  []string
	}{
		{"defaults", nil, []string{
			"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)",
		}},
		{"extra args sorted after", map[string]string{"vmodule": "proxier=4", "v": "2"}, []string{
			"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)",
			"--v=2", "--vmodule=proxier=4",
		}},
		{"override in place", map[string]string{"hostname-override": "node-a", "v": "4"}, []string{
			"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=node-a", "--v=4",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions()
			o.Proxy.ExtraArgs = c.extra
			got := daemonSetContainer(t, mustRender(t, o), KubeProxyDaemonSet).Command
			if !slices.Equal(got, c.want) {
				t.Errorf("command\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// The image's kube-proxy is told the mode, and spares itself its iptables clean-up only in nftables
// mode, the default.
func TestKubeProxyModeEnv(t *testing.T) {
	for mode, want := range map[string]string{"": "nftables", config.ProxyNFTables: "nftables", config.ProxyIPTables: "iptables"} {
		o := testOptions()
		o.Proxy.Mode = mode
		var got []string
		for _, e := range daemonSetContainer(t, mustRender(t, o), KubeProxyDaemonSet).Env {
			if e.Name == "CAIRN_KUBE_PROXY_MODE" {
				got = append(got, e.Value)
			}
		}
		if !slices.Equal(got, []string{want}) {
			t.Errorf("mode %q: CAIRN_KUBE_PROXY_MODE = %q, want %q", mode, got, want)
		}
	}
}

func TestKubeProxyDaemonSet(t *testing.T) {
	o := testOptions()
	o.HostPaths.XtablesLock = "/tmp/sbx/run/xtables.lock"
	objs := mustRender(t, o)
	ds := daemonSet(t, objs, KubeProxyDaemonSet)
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.ServiceAccountName != kubeProxyName || spec.PriorityClassName != systemNodeCritical {
		t.Errorf("pod: hostNetwork %v, serviceAccount %q, priority %q", spec.HostNetwork, spec.ServiceAccountName, spec.PriorityClassName)
	}
	if !toleratesAll(spec.Tolerations) {
		t.Errorf("tolerations %+v, want one that tolerates everything", spec.Tolerations)
	}
	c := onlyContainer(t, spec)
	if c.Image != o.Images.KubeProxy || c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("container: image %q, securityContext %+v", c.Image, c.SecurityContext)
	}
	var lock string
	for _, v := range spec.Volumes {
		if v.Name == "xtables-lock" {
			lock = v.HostPath.Path
		}
	}
	if lock != o.HostPaths.XtablesLock {
		t.Errorf("xtables lock at %q, want %q", lock, o.HostPaths.XtablesLock)
	}
	crb := find[*rbacv1.ClusterRoleBinding](t, objs, "cairn:node-proxier")
	if crb.RoleRef.Name != "system:node-proxier" || len(crb.Subjects) != 1 ||
		crb.Subjects[0] != (rbacv1.Subject{Kind: "ServiceAccount", Name: kubeProxyName, Namespace: "kube-system"}) {
		t.Errorf("kube-proxy's binding: %+v %+v", crb.RoleRef, crb.Subjects)
	}
}

// toleratesAll is one toleration for every taint: no key, no effect, operator Exists.
func toleratesAll(tols []corev1.Toleration) bool {
	return len(tols) == 1 && tols[0] == corev1.Toleration{Operator: corev1.TolerationOpExists}
}
