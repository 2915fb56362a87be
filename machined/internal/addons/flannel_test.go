package addons

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// netConf is the net-conf.json fields flannel's subnet.Config reads, decoded strictly.
type netConf struct {
	Network        string
	IPv6Network    string
	EnableIPv4     *bool
	EnableIPv6     bool
	EnableNFTables bool
	Backend        struct{ Type string }
}

func decodeNetConf(t *testing.T, o Options) netConf {
	t.Helper()
	data := configData(t, mustRender(t, o), flannelConfigMap, flannelNetConfKey)
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	var c netConf
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("net-conf.json: %v\n%s", err, data)
	}
	return c
}

func TestFlannelNetConf(t *testing.T) {
	o := testOptions()
	c := decodeNetConf(t, o)
	if c.Network != o.PodCIDR.String() || c.IPv6Network != "" || c.EnableIPv4 != nil || c.EnableIPv6 {
		t.Errorf("IPv4 pod network: %+v", c)
	}
	if !c.EnableNFTables || c.Backend.Type != "vxlan" {
		t.Errorf("want nftables and vxlan: %+v", c)
	}

	o.PodCIDR = netip.MustParsePrefix("fd00:10:244::/56")
	o.ServiceCIDR, o.DNSServiceIP = netip.MustParsePrefix("fd00:10:96::/112"), netip.MustParseAddr("fd00:10:96::a")
	c = decodeNetConf(t, o)
	if c.Network != "" || c.IPv6Network != "fd00:10:244::/56" || c.EnableIPv4 == nil || *c.EnableIPv4 || !c.EnableIPv6 {
		t.Errorf("IPv6 pod network: %+v", c)
	}
}

func TestFlannelDaemonSet(t *testing.T) {
	o := testOptions()
	o.APIServer = "https://[fd00::10]:7443"
	objs := mustRender(t, o)
	spec := daemonSet(t, objs, FlannelDaemonSet).Spec.Template.Spec
	if !spec.HostNetwork || spec.ServiceAccountName != flannelName || spec.PriorityClassName != systemNodeCritical {
		t.Errorf("pod: hostNetwork %v, serviceAccount %q, priority %q", spec.HostNetwork, spec.ServiceAccountName, spec.PriorityClassName)
	}
	if !toleratesAll(spec.Tolerations) {
		t.Errorf("tolerations %+v, want one that tolerates everything", spec.Tolerations)
	}
	if len(spec.InitContainers) != 0 {
		t.Errorf("init containers %v: Cairn installs no flannel CNI plugin", spec.InitContainers)
	}
	c := onlyContainer(t, spec)
	if c.Image != o.Images.Flannel || !slices.Equal(c.Command, []string{"/opt/bin/flanneld"}) {
		t.Errorf("image %q command %q", c.Image, c.Command)
	}
	for _, a := range []string{"--ip-masq", "--kube-subnet-mgr", "--iface=$(NODE_IP)"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("args %q lack %s", c.Args, a)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	// The API through the endpoint (an IPv6 literal without brackets: the client adds them).
	if env["KUBERNETES_SERVICE_HOST"].Value != "fd00::10" || env["KUBERNETES_SERVICE_PORT"].Value != "7443" {
		t.Errorf("API at %q port %q", env["KUBERNETES_SERVICE_HOST"].Value, env["KUBERNETES_SERVICE_PORT"].Value)
	}
	for name, field := range map[string]string{
		"NODE_IP": "status.hostIP", "NODE_NAME": "spec.nodeName", "POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace",
	} {
		if e := env[name]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != field {
			t.Errorf("%s is not from %s: %+v", name, field, e)
		}
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) {
		t.Errorf("securityContext %+v", sc)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	if mounts["run"] != "/run/flannel" || hostPaths["run"] != o.HostPaths.FlannelRun {
		t.Errorf("run: %q from %q", mounts["run"], hostPaths["run"])
	}
	if mounts["flannel-cfg"] != "/etc/kube-flannel/" {
		t.Errorf("net-conf.json is not where flanneld reads it (/etc/kube-flannel/net-conf.json): %q", mounts["flannel-cfg"])
	}
}
