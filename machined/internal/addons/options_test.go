package addons

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/paths"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// One golden file per add-on, each in its own order; Render's merged order is TestApplyOrder's.
func TestGolden(t *testing.T) {
	o := testOptions()
	ep, err := o.validate()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file   string
		render func() ([]kube.Object, error)
	}{
		{"kube-proxy.yaml", func() ([]kube.Object, error) { return kubeProxy(o) }},
		{"coredns.yaml", func() ([]kube.Object, error) { return coreDNS(o, ep) }},
		{"flannel.yaml", func() ([]kube.Object, error) { return flannel(o, ep) }},
	} {
		t.Run(c.file, func(t *testing.T) {
			objs, err := c.render()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.file, encode(t, objs))
		})
	}
}

func TestApplyOrder(t *testing.T) {
	objs := mustRender(t, testOptions())
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.Object.GetObjectKind().GroupVersionKind().Kind)
	}
	want := []string{
		"ServiceAccount", "ServiceAccount", "ServiceAccount",
		"ClusterRole", "ClusterRole",
		"ClusterRoleBinding", "ClusterRoleBinding", "ClusterRoleBinding",
		"ConfigMap", "ConfigMap", "ConfigMap",
		"Service",
		"DaemonSet", "Deployment", "DaemonSet",
	}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds in apply order:\n got %v\nwant %v", kinds, want)
	}
}

// What the lead's apply and health checks rely on, for every object.
func TestObjectsAreComplete(t *testing.T) {
	for _, o := range mustRender(t, testOptions()) {
		gvk := o.Object.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			t.Errorf("%s: TypeMeta not set", o.ItemPath())
		}
		m, err := meta.Accessor(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if m.GetName() != o.Name {
			t.Errorf("%s: object is named %q", o.ItemPath(), m.GetName())
		}
		if got := m.GetLabels()[ManagedByLabel]; got != ManagedByValue {
			t.Errorf("%s: %s label is %q", o.ItemPath(), ManagedByLabel, got)
		}
		if ns := m.GetNamespace(); ns != "" {
			if ns != Namespace {
				t.Errorf("%s: namespace %q", o.ItemPath(), ns)
			}
			if !strings.Contains(o.Path, "/namespaces/"+Namespace+"/") {
				t.Errorf("%s: path has no namespace", o.ItemPath())
			}
		}
		if _, err := o.JSON(); err != nil {
			t.Error(err)
		}
	}
	objs := mustRender(t, testOptions())
	for _, c := range []struct{ kind, name, itemPath string }{
		{"DaemonSet", KubeProxyDaemonSet, "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy"},
		{"Deployment", CoreDNSDeployment, "/apis/apps/v1/namespaces/kube-system/deployments/coredns"},
		{"Service", KubeDNSService, "/api/v1/namespaces/kube-system/services/kube-dns"},
		{"DaemonSet", FlannelDaemonSet, "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-flannel-ds"},
		{"ClusterRoleBinding", "cairn:node-proxier", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cairn:node-proxier"},
	} {
		i := slices.IndexFunc(objs, func(o kube.Object) bool {
			return o.Name == c.name && o.Object.GetObjectKind().GroupVersionKind().Kind == c.kind
		})
		if i < 0 {
			t.Errorf("no %s %s", c.kind, c.name)
			continue
		}
		if got := objs[i].ItemPath(); got != c.itemPath {
			t.Errorf("%s %s: ItemPath %s, want %s", c.kind, c.name, got, c.itemPath)
		}
	}
}

// The exported selectors are what the workloads' selectors say.
func TestSelectors(t *testing.T) {
	objs := mustRender(t, testOptions())
	for _, c := range []struct {
		selector string
		got      map[string]string
	}{
		{KubeProxySelector, daemonSet(t, objs, KubeProxyDaemonSet).Spec.Selector.MatchLabels},
		{FlannelSelector, daemonSet(t, objs, FlannelDaemonSet).Spec.Selector.MatchLabels},
		{CoreDNSSelector, deployment(t, objs).Spec.Selector.MatchLabels},
	} {
		k, v, _ := strings.Cut(c.selector, "=")
		if len(c.got) != 1 || c.got[k] != v {
			t.Errorf("selector %s, workload selects %v", c.selector, c.got)
		}
	}
}

func TestSwitches(t *testing.T) {
	type present struct{ proxy, dns, flannel bool }
	for _, c := range []struct {
		name string
		edit func(*Options)
		want present
	}{
		{"all", func(*Options) {}, present{true, true, true}},
		{"default CNI is flannel", func(o *Options) { o.CNI = "" }, present{true, true, true}},
		{"proxy disabled", func(o *Options) { o.Proxy.Disabled = true }, present{false, true, true}},
		{"coredns disabled", func(o *Options) { o.CoreDNS.Disabled = true }, present{true, false, true}},
		{"bridge", func(o *Options) { o.CNI = config.CNIBridge }, present{true, true, false}},
		{"none", func(o *Options) { o.CNI = config.CNINone }, present{true, true, false}},
		{"nothing", func(o *Options) {
			o.Proxy.Disabled, o.CoreDNS.Disabled, o.CNI = true, true, config.CNINone
		}, present{false, false, false}},
		// A disabled add-on needs none of its settings.
		{"disabled needs no image", func(o *Options) {
			o.Proxy.Disabled, o.CNI, o.Images.KubeProxy, o.Images.Flannel = true, config.CNIBridge, "", ""
			o.HostPaths = HostPaths{}
		}, present{false, true, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions()
			c.edit(&o)
			objs := mustRender(t, o)
			got := present{
				proxy:   has(objs, "DaemonSet", KubeProxyDaemonSet),
				dns:     has(objs, "Deployment", CoreDNSDeployment),
				flannel: has(objs, "DaemonSet", FlannelDaemonSet),
			}
			if got != c.want {
				t.Errorf("rendered %+v, want %+v", got, c.want)
			}
			// Nothing of a switched-off add-on is left behind (its RBAC and config included).
			want := 0
			for _, n := range []struct {
				on bool
				k  int
			}{{c.want.proxy, 4}, {c.want.dns, 6}, {c.want.flannel, 5}} {
				if n.on {
					want += n.k
				}
			}
			if len(objs) != want {
				t.Errorf("%d objects, want %d", len(objs), want)
			}
		})
	}
}

func TestBadOptions(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(*Options)
		field string // the error must name it
	}{
		{"http endpoint", func(o *Options) { o.APIServer = "http://api.demo.example:6443" }, "APIServer"},
		{"endpoint without port", func(o *Options) { o.APIServer = "https://api.demo.example" }, "APIServer"},
		{"endpoint with path", func(o *Options) { o.APIServer = "https://api.demo.example:6443/k8s" }, "APIServer"},
		{"endpoint not a URL", func(o *Options) { o.APIServer = "api.demo.example:6443" }, "APIServer"},
		{"empty endpoint", func(o *Options) { o.APIServer = "" }, "APIServer"},
		{"no pod CIDR", func(o *Options) { o.PodCIDR = netip.Prefix{} }, "PodCIDR"},
		{"no service CIDR", func(o *Options) { o.ServiceCIDR = netip.Prefix{} }, "ServiceCIDR"},
		{"overlapping CIDRs", func(o *Options) { o.PodCIDR = netip.MustParsePrefix("10.96.0.0/16") }, "overlaps ServiceCIDR"},
		{"DNS IP outside", func(o *Options) { o.DNSServiceIP = netip.MustParseAddr("10.244.0.10") }, "DNSServiceIP 10.244.0.10 is outside ServiceCIDR"},
		{"no DNS IP", func(o *Options) { o.DNSServiceIP = netip.Addr{} }, "DNSServiceIP"},
		{"empty domain", func(o *Options) { o.DNSDomain = "" }, "DNSDomain"},
		{"domain with dot", func(o *Options) { o.DNSDomain = "cluster.local." }, "DNSDomain"},
		{"domain upper case", func(o *Options) { o.DNSDomain = "Cluster.Local" }, "DNSDomain"},
		{"CNI", func(o *Options) { o.CNI = "calico" }, "CNI"},
		{"kube-proxy image", func(o *Options) { o.Images.KubeProxy = "" }, "Images.KubeProxy"},
		{"CoreDNS image", func(o *Options) { o.Images.CoreDNS = "" }, "Images.CoreDNS"},
		{"flannel image", func(o *Options) { o.Images.Flannel = "a b" }, "Images.Flannel"},
		{"proxy mode", func(o *Options) { o.Proxy.Mode = "ipvs" }, "Proxy.Mode"},
		{"extra arg dashes", func(o *Options) { o.Proxy.ExtraArgs = map[string]string{"--v": "2"} }, "Proxy.ExtraArgs"},
		{"extra arg =", func(o *Options) { o.Proxy.ExtraArgs = map[string]string{"v=2": ""} }, "Proxy.ExtraArgs"},
		{"replicas", func(o *Options) { o.CoreDNS.Replicas = -1 }, "CoreDNS.Replicas"},
		{"flannel run", func(o *Options) { o.HostPaths.FlannelRun = "run/flannel" }, "HostPaths.FlannelRun"},
		{"xtables lock", func(o *Options) { o.HostPaths.XtablesLock = "" }, "HostPaths.XtablesLock"},
		{"lib modules", func(o *Options) { o.HostPaths.LibModules = "/lib/../lib/modules" }, "HostPaths.LibModules"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions()
			c.edit(&o)
			objs, err := Render(o)
			if err == nil {
				t.Fatalf("Render accepted it and rendered %d objects", len(objs))
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %q does not name %s", err, c.field)
			}
		})
	}
}

// All problems are reported at once, each once.
func TestBadOptionsAllAtOnce(t *testing.T) {
	o := testOptions()
	o.Images = Images{}
	o.HostPaths.XtablesLock = "relative"
	_, err := Render(o)
	if err == nil {
		t.Fatal("Render accepted empty images")
	}
	for _, f := range []string{"Images.KubeProxy", "Images.CoreDNS", "Images.Flannel"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
	if n := strings.Count(err.Error(), "HostPaths.XtablesLock"); n != 1 {
		t.Errorf("XtablesLock reported %d times: %v", n, err)
	}
}

func TestAPIServerForms(t *testing.T) {
	for _, c := range []struct{ in, host, port string }{
		{"https://api.demo.example:6443", "api.demo.example", "6443"},
		{"https://api.demo.example:443/", "api.demo.example", "443"},
		{"https://192.168.50.10:6443", "192.168.50.10", "6443"},
		{"https://[fd00::10]:6443", "fd00::10", "6443"},
	} {
		ep, err := parseAPIServer(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if ep.host != c.host || ep.port != c.port {
			t.Errorf("%s: host %q port %q, want %q %q", c.in, ep.host, ep.port, c.host, c.port)
		}
	}
}

func TestDefaultHostPaths(t *testing.T) {
	got := DefaultHostPaths(paths.Paths{Root: "/tmp/sbx"})
	want := HostPaths{FlannelRun: "/tmp/sbx/run/flannel", XtablesLock: "/tmp/sbx/run/xtables.lock", LibModules: "/tmp/sbx/lib/modules"}
	if got != want {
		t.Errorf("DefaultHostPaths = %+v, want %+v", got, want)
	}
	o := testOptions()
	o.HostPaths = got
	objs := mustRender(t, o)
	for _, ds := range []string{KubeProxyDaemonSet, FlannelDaemonSet} {
		for _, v := range daemonSet(t, objs, ds).Spec.Template.Spec.Volumes {
			if v.HostPath != nil && !strings.HasPrefix(v.HostPath.Path, "/tmp/sbx/") {
				t.Errorf("%s: volume %s at %s, not under the sandbox root", ds, v.Name, v.HostPath.Path)
			}
		}
	}
}

// With discovery names, the add-ons that talk to the API reach it by api.internal.<cluster> and read it
// from the node's /etc/hosts itself, not from the copy the kubelet makes when the pod starts (a
// control plane's new address would never reach it); without them (sandbox mode), no such mount.
// Flannel and CoreDNS take the endpoint, not the kubernetes Service, whose address needs kube-proxy's rules.
func TestEtcHostsMount(t *testing.T) {
	for _, hosts := range []string{"", "/etc/hosts"} {
		o := testOptions()
		o.APIServer = "https://api.internal.demo:6443"
		o.HostPaths.EtcHosts = hosts
		objs := mustRender(t, o)
		specs := map[string]corev1.PodSpec{
			KubeProxyDaemonSet: daemonSet(t, objs, KubeProxyDaemonSet).Spec.Template.Spec,
			FlannelDaemonSet:   daemonSet(t, objs, FlannelDaemonSet).Spec.Template.Spec,
			CoreDNSDeployment:  deployment(t, objs).Spec.Template.Spec,
		}
		for name, spec := range specs {
			var mounted, volume bool
			for _, m := range spec.Containers[0].VolumeMounts {
				mounted = mounted || m.MountPath == "/etc/hosts" && m.ReadOnly
			}
			for _, v := range spec.Volumes {
				volume = volume || v.HostPath != nil && v.HostPath.Path == hosts && hosts != "" &&
					v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathFile
			}
			if want := hosts != ""; mounted != want || volume != want {
				t.Errorf("EtcHosts %q: %s mounts /etc/hosts read-only = %v, from a File host path = %v; want %v",
					hosts, name, mounted, volume, want)
			}
		}
		for _, name := range []string{FlannelDaemonSet, CoreDNSDeployment} {
			env := specs[name].Containers[0].Env
			for _, want := range []corev1.EnvVar{
				{Name: "KUBERNETES_SERVICE_HOST", Value: "api.internal.demo"},
				{Name: "KUBERNETES_SERVICE_PORT", Value: "6443"},
			} {
				if !slices.Contains(env, want) {
					t.Errorf("%s's environment %+v lacks %s=%s", name, env, want.Name, want.Value)
				}
			}
		}
	}
	o := testOptions()
	o.HostPaths.EtcHosts = "etc/hosts"
	if _, err := Render(o); err == nil || !strings.Contains(err.Error(), "HostPaths.EtcHosts") {
		t.Errorf("Render with a relative EtcHosts: error = %v, want one naming HostPaths.EtcHosts", err)
	}
}

// Every add-on container asks for CPU. A pod without a request is BestEffort, with a CPU weight of 1
// on the node: on a control plane whose CPUs are busy (emulation, a stolen host) kube-proxy waited for
// CPU for over ten minutes, and no Service answered.
func TestAddonsRequestCPU(t *testing.T) {
	for _, o := range mustRender(t, testOptions()) {
		var spec *corev1.PodSpec
		switch obj := o.Object.(type) {
		case *appsv1.DaemonSet:
			spec = &obj.Spec.Template.Spec
		case *appsv1.Deployment:
			spec = &obj.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
				t.Errorf("%s: container %s requests no CPU (a BestEffort pod)", o.ItemPath(), c.Name)
			}
		}
	}
}
