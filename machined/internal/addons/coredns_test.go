package addons

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The kubelets' clusterDNS is DNSServiceIP: the Service must sit exactly there.
func TestKubeDNSServiceIP(t *testing.T) {
	for _, c := range []struct{ serviceCIDR, dnsIP string }{
		{"10.96.0.0/12", "10.96.0.10"},
		{"172.20.0.0/16", "172.20.0.10"},
		{"fd00:10:96::/112", "fd00:10:96::a"},
	} {
		o := testOptions()
		o.ServiceCIDR, o.DNSServiceIP = netip.MustParsePrefix(c.serviceCIDR), netip.MustParseAddr(c.dnsIP)
		if strings.Contains(c.serviceCIDR, ":") {
			o.PodCIDR = netip.MustParsePrefix("fd00:10:244::/56")
		}
		svc := find[*corev1.Service](t, mustRender(t, o), KubeDNSService)
		if svc.Spec.ClusterIP != c.dnsIP {
			t.Errorf("kube-dns clusterIP %q, want %s", svc.Spec.ClusterIP, c.dnsIP)
		}
		for k, v := range coreDNSLabels {
			if svc.Spec.Selector[k] != v {
				t.Errorf("kube-dns selects %v, not the CoreDNS pods", svc.Spec.Selector)
			}
		}
	}
}

func TestCoreDNSReplicasRendered(t *testing.T) {
	for _, c := range []struct {
		set, worked, want int32
	}{
		{0, 2, 2},
		{0, 1, 1},
		{0, 0, 1}, // the caller worked nothing out: one pod, never none
		{1, 2, 1}, // a configured count wins
		{3, 1, 3},
	} {
		o := testOptions()
		o.CoreDNS.Replicas, o.CoreDNSReplicas = c.set, c.worked
		d := deployment(t, mustRender(t, o))
		if d.Spec.Replicas == nil || *d.Spec.Replicas != c.want {
			t.Errorf("Replicas %d, worked out %d: rendered %v, want %d", c.set, c.worked, d.Spec.Replicas, c.want)
		}
	}
}

func TestCorefile(t *testing.T) {
	o := testOptions()
	o.DNSDomain = "k8s.demo.example"
	cf := configData(t, mustRender(t, o), coreDNSName, corefileKey)
	for _, want := range []string{
		"kubernetes k8s.demo.example in-addr.arpa ip6.arpa {",
		"disable success k8s.demo.example",
		"disable denial k8s.demo.example",
		"forward . /etc/resolv.conf {",
		"health {",
		"ready\n",
		"prometheus :9153",
	} {
		if !strings.Contains(cf, want) {
			t.Errorf("Corefile has no %q:\n%s", want, cf)
		}
	}
	if strings.Contains(cf, "cluster.local") {
		t.Errorf("Corefile names cluster.local, not the configured domain:\n%s", cf)
	}
	if strings.Count(cf, "{") != strings.Count(cf, "}") {
		t.Errorf("Corefile braces do not balance:\n%s", cf)
	}
}

// The probes and the Service reach ports the container declares, and the health and ready plugins
// listen where the probes ask.
func TestCoreDNSPorts(t *testing.T) {
	objs := mustRender(t, testOptions())
	c := onlyContainer(t, deployment(t, objs).Spec.Template.Spec)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["liveness-probe"] != 8080 || ports["readiness-probe"] != 8181 {
		t.Errorf("probe ports %v", ports)
	}
	if p := c.LivenessProbe.HTTPGet; p.Path != "/health" || ports[p.Port.StrVal] == 0 {
		t.Errorf("liveness probe %+v", p)
	}
	if p := c.ReadinessProbe.HTTPGet; p.Path != "/ready" || ports[p.Port.StrVal] == 0 {
		t.Errorf("readiness probe %+v", p)
	}
	svc := find[*corev1.Service](t, objs, KubeDNSService)
	for _, sp := range svc.Spec.Ports {
		if ports[sp.Name] != sp.TargetPort.IntVal {
			t.Errorf("Service port %s targets %d, the container has %d", sp.Name, sp.TargetPort.IntVal, ports[sp.Name])
		}
	}
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("securityContext %+v", sc)
	}
	// No capability: the non-root CoreDNS binds port 53 through the pod's sysctl.
	if sc != nil && (sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL") {
		t.Errorf("capabilities %+v, want ALL dropped and none added", sc.Capabilities)
	}
	pod := deployment(t, objs).Spec.Template.Spec
	if psc := pod.SecurityContext; psc == nil || len(psc.Sysctls) != 1 ||
		psc.Sysctls[0] != (corev1.Sysctl{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}) {
		t.Errorf("pod securityContext %+v, want ports from 53 unprivileged", psc)
	}
	if spec := pod; spec.DNSPolicy != corev1.DNSDefault {
		t.Errorf("dnsPolicy %q: CoreDNS must use the node's resolvers", spec.DNSPolicy)
	}
}

// CoreDNS and flannel are Ready as soon as they are: a startup probe asks their readiness check every
// second, and their readiness probe has no initial delay, which would swallow the kubelet's readiness
// probe made as the startup probe passes.
func TestAddonStartupProbes(t *testing.T) {
	objs := mustRender(t, testOptions())
	for name, spec := range map[string]corev1.PodSpec{
		"coredns": deployment(t, objs).Spec.Template.Spec,
		"flannel": daemonSet(t, objs, FlannelDaemonSet).Spec.Template.Spec,
	} {
		c := onlyContainer(t, spec)
		s, r := c.StartupProbe, c.ReadinessProbe
		switch {
		case s == nil || r == nil:
			t.Errorf("%s: startup probe %v, readiness probe %v", name, s, r)
		case !reflect.DeepEqual(s.ProbeHandler, r.ProbeHandler):
			t.Errorf("%s: startup probe asks %+v, readiness probe %+v", name, s.HTTPGet, r.HTTPGet)
		case s.PeriodSeconds != 1 || s.PeriodSeconds*s.FailureThreshold < 300:
			t.Errorf("%s: startup probe every %d s, %d times: want every second for five minutes", name, s.PeriodSeconds, s.FailureThreshold)
		case r.InitialDelaySeconds != 0:
			t.Errorf("%s: readiness probe's initial delay %d s, want none", name, r.InitialDelaySeconds)
		}
	}
}
