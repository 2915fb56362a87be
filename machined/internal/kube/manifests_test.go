package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/paths"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestManifestsGolden(t *testing.T) {
	r := newTestRenderer(t)
	etcd, err := r.EtcdManifest(EtcdOptions{})
	if err != nil {
		t.Fatalf("EtcdManifest: %v", err)
	}
	cp, err := r.ControlPlaneManifests()
	if err != nil {
		t.Fatalf("ControlPlaneManifests: %v", err)
	}
	files := append(Files{etcd}, cp...)
	wantPaths := []string{
		"/etc/kubernetes/manifests/etcd.yaml",
		"/etc/kubernetes/manifests/kube-apiserver.yaml",
		"/etc/kubernetes/manifests/kube-controller-manager.yaml",
		"/etc/kubernetes/manifests/kube-scheduler.yaml",
	}
	var gotPaths []string
	for _, f := range files {
		gotPaths = append(gotPaths, f.Path)
		golden(t, "manifests/"+strings.TrimPrefix(f.Path, "/etc/kubernetes/manifests/"), f.Data)
		if f.Mode != 0o600 {
			t.Errorf("%s mode = %v, want 0600", f.Path, f.Mode)
		}
	}
	if diff := cmp.Diff(wantPaths, gotPaths); diff != "" {
		t.Errorf("manifest paths (-want +got):\n%s", diff)
	}
}

// Every manifest must decode back into a Pod that a kubelet would run as we mean: host network,
// never pulling, the critical priority, and each mount backed by a volume.
func TestManifestsDecode(t *testing.T) {
	r := newTestRenderer(t)
	etcd, _ := r.EtcdManifest(EtcdOptions{})
	cp, _ := r.ControlPlaneManifests()
	for _, f := range append(Files{etcd}, cp...) {
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict(f.Data, &pod); err != nil {
			t.Errorf("%s: decode: %v", f.Path, err)
			continue
		}
		s := pod.Spec
		if !s.HostNetwork || s.PriorityClassName != "system-node-critical" || s.Priority == nil {
			t.Errorf("%s: hostNetwork=%v priorityClassName=%q priority=%v, want true, system-node-critical, set",
				f.Path, s.HostNetwork, s.PriorityClassName, s.Priority)
		}
		vols := map[string]bool{}
		for _, v := range s.Volumes {
			vols[v.Name] = true
		}
		for _, c := range s.Containers {
			if c.ImagePullPolicy != corev1.PullNever {
				t.Errorf("%s: imagePullPolicy = %q, want Never", f.Path, c.ImagePullPolicy)
			}
			for _, m := range c.VolumeMounts {
				if !vols[m.Name] {
					t.Errorf("%s: mount %q has no volume", f.Path, m.Name)
				}
			}
		}
	}
}

func TestCommand(t *testing.T) {
	defaults := []arg{{"b", "2"}, {"a", "1"}, {"c", "3"}}
	tests := []struct {
		name  string
		extra map[string]string
		want  []string
	}{
		{"defaults sorted", nil, []string{"x", "--a=1", "--b=2", "--c=3"}},
		{"override in place", map[string]string{"b": "two"}, []string{"x", "--a=1", "--b=two", "--c=3"}},
		{"extra appended sorted", map[string]string{"z": "26", "d": "4"}, []string{"x", "--a=1", "--b=2", "--c=3", "--d=4", "--z=26"}},
		{"empty value kept", map[string]string{"a": ""}, []string{"x", "--a=", "--b=2", "--c=3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := append([]arg(nil), defaults...)
			if diff := cmp.Diff(tt.want, command("x", d, tt.extra)); diff != "" {
				t.Errorf("command(...) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPIServerFlags(t *testing.T) {
	tests := []struct {
		name     string
		extra    map[string]string
		want     []string
		wantNone []string
	}{
		{
			name:  "extraArgs override a default once",
			extra: map[string]string{"allow-privileged": "false"},
			want:  []string{"--allow-privileged=false", "--authorization-mode=Node,RBAC", "--advertise-address=192.168.50.10"},
		},
		{
			name:     "authorization-config replaces the mode",
			extra:    map[string]string{"authorization-config": "/etc/kubernetes/authz.yaml"},
			want:     []string{"--authorization-config=/etc/kubernetes/authz.yaml"},
			wantNone: []string{"--authorization-mode="},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Cluster.APIServer.ExtraArgs = tt.extra
			r, err := New(cfg, testNode, newTestRenderer(t).paths, DefaultImages())
			if err != nil {
				t.Fatal(err)
			}
			cmd := r.APIServerPod().Spec.Containers[0].Command
			count := map[string]int{}
			for _, a := range cmd[1:] {
				count[strings.SplitN(a, "=", 2)[0]]++
			}
			for name, n := range count {
				if n > 1 {
					t.Errorf("flag %s given %d times", name, n)
				}
			}
			joined := strings.Join(cmd, " ")
			for _, w := range tt.want {
				if !strings.Contains(joined, w) {
					t.Errorf("APIServerPod command = %q, want it to contain %q", joined, w)
				}
			}
			for _, w := range tt.wantNone {
				if strings.Contains(joined, w) {
					t.Errorf("APIServerPod command = %q, want no %q", joined, w)
				}
			}
		})
	}
}

func TestEtcdJoinExisting(t *testing.T) {
	r := newTestRenderer(t)
	pod := r.EtcdPod(EtcdOptions{Existing: []EtcdMember{
		{Name: "cp-0", PeerURL: "https://192.168.50.9:2380"},
		{Name: "cp-1", PeerURL: "https://192.168.50.10:2380"},
	}})
	cmd := strings.Join(pod.Spec.Containers[0].Command, " ")
	for _, w := range []string{
		"--initial-cluster=cp-0=https://192.168.50.9:2380,cp-1=https://192.168.50.10:2380",
		"--initial-cluster-state=existing",
	} {
		if !strings.Contains(cmd, w) {
			t.Errorf("EtcdPod(existing) command = %q, want %q", cmd, w)
		}
	}
}

func TestEtcdNoQuota(t *testing.T) {
	cfg := testConfig(t)
	cfg.Cluster.Etcd.QuotaBackendBytes = 0
	r, err := New(cfg, testNode, newTestRenderer(t).paths, DefaultImages())
	if err != nil {
		t.Fatal(err)
	}
	cmd := strings.Join(r.EtcdPod(EtcdOptions{}).Spec.Containers[0].Command, " ")
	if strings.Contains(cmd, "quota-backend-bytes") {
		t.Errorf("EtcdPod command = %q, want no --quota-backend-bytes when the config sets none", cmd)
	}
}

// A joining control plane's learner is added at the URL its own manifest will listen on.
func TestEtcdPeerURL(t *testing.T) {
	for host, want := range map[string]string{"10.5.0.3": "https://10.5.0.3:2380", "fd00::3": "https://[fd00::3]:2380"} {
		if got := EtcdPeerURL(host); got != want {
			t.Errorf("EtcdPeerURL(%q) = %q, want %q", host, got, want)
		}
	}
}

// With discovery names (a real node) etcd advertises its URLs by the node's name, so a member whose
// address changes stays reachable at the URL its peers know, and listens on addresses (etcd takes no name
// there); the API server reaches etcd on loopback and by the cluster's etcd name. Both read the node's
// /etc/hosts itself, which machined keeps current. Without (sandbox mode) everything is by address.
func TestEtcdByName(t *testing.T) {
	for _, names := range []bool{false, true} {
		node := testNode
		node.DiscoveryNames = names
		r, err := New(testConfig(t), node, paths.Paths{Root: "/"}, DefaultImages())
		if err != nil {
			t.Fatal(err)
		}
		host := "192.168.50.10"
		servers := "--etcd-servers=https://127.0.0.1:2379"
		if names {
			host = "cp-1"
			servers += ",https://etcd.internal.demo:2379"
		}
		etcd, api := r.EtcdPod(EtcdOptions{}), r.APIServerPod()
		cmd := strings.Join(etcd.Spec.Containers[0].Command, " ")
		for _, w := range []string{
			"--advertise-client-urls=https://" + host + ":2379 ",
			"--initial-advertise-peer-urls=https://" + host + ":2380 ",
			"--initial-cluster=cp-1=https://" + host + ":2380 ",
			"--listen-peer-urls=https://192.168.50.10:2380 ",
			"--listen-client-urls=https://127.0.0.1:2379,https://192.168.50.10:2379 ",
		} {
			if !strings.Contains(cmd+" ", w) {
				t.Errorf("names %v: EtcdPod command = %q, want %q", names, cmd, w)
			}
		}
		if got := r.EtcdPeerURL(); got != "https://"+host+":2380" {
			t.Errorf("names %v: EtcdPeerURL() = %q, want by %s", names, got, host)
		}
		if apiCmd := strings.Join(api.Spec.Containers[0].Command, " ") + " "; !strings.Contains(apiCmd, servers+" ") {
			t.Errorf("names %v: APIServerPod command = %q, want %q", names, apiCmd, servers)
		}
		for _, p := range []*corev1.Pod{etcd, api} {
			mounted := false
			for i, m := range p.Spec.Containers[0].VolumeMounts {
				if m.MountPath == "/etc/hosts" {
					v := p.Spec.Volumes[i].HostPath
					mounted = m.ReadOnly && v != nil && v.Path == "/etc/hosts" && v.Type != nil && *v.Type == corev1.HostPathFile
				}
			}
			if mounted != names {
				t.Errorf("names %v: %s mounts the node's /etc/hosts read-only = %v, want %v", names, p.Name, mounted, names)
			}
		}
	}
}

// The kubelet restarts a static pod whose process exits; a liveness probe adds a restart for being slow.
// The API server must not have one: its restart under load is what takes a busy control plane down.
// The others keep theirs (a controller-manager that lost its lease and hangs is restarted).
func TestAPIServerHasNoKillingProbe(t *testing.T) {
	r := newTestRenderer(t)
	for _, tc := range []struct {
		pod      *corev1.Pod
		killable bool
	}{
		{r.APIServerPod(), false},
		{r.ControllerManagerPod(), true},
		{r.SchedulerPod(), true},
		{r.EtcdPod(EtcdOptions{}), true},
	} {
		c := tc.pod.Spec.Containers[0]
		if got := c.LivenessProbe != nil && c.StartupProbe != nil; got != tc.killable {
			t.Errorf("%s: liveness %v, startup %v; want both probes = %v", c.Name, c.LivenessProbe != nil, c.StartupProbe != nil, tc.killable)
		}
		if c.Name == KubeAPIServer && c.ReadinessProbe == nil {
			t.Errorf("%s has no readiness probe: kubectl no longer shows whether it is ready", c.Name)
		}
	}
}

// Every startup probe gives a first start ten minutes, which an emulated control plane needs. The
// controller-manager's and the scheduler's ask every second, so their pods are Ready (what health waits
// for) as soon as they serve; etcd's waits 10 s, or its mirror pod comes only at the kubelet's resync.
func TestStartupProbes(t *testing.T) {
	r := newTestRenderer(t)
	for _, tc := range []struct {
		pod        *corev1.Pod
		wantPeriod int32
		wantDelay  int32
	}{
		{r.ControllerManagerPod(), 1, 0},
		{r.SchedulerPod(), 1, 0},
		{r.EtcdPod(EtcdOptions{}), 10, 10},
	} {
		c := tc.pod.Spec.Containers[0]
		s := c.StartupProbe
		if s == nil {
			t.Errorf("%s: no startup probe", c.Name)
			continue
		}
		if allowed := s.InitialDelaySeconds + s.PeriodSeconds*s.FailureThreshold; allowed < 600 {
			t.Errorf("%s: startup probe allows %d s, want at least 600", c.Name, allowed)
		}
		if s.PeriodSeconds != tc.wantPeriod || s.InitialDelaySeconds != tc.wantDelay {
			t.Errorf("%s: startup probe every %d s after %d s, want every %d s after %d s", c.Name,
				s.PeriodSeconds, s.InitialDelaySeconds, tc.wantPeriod, tc.wantDelay)
		}
	}
}

// The API server's manifest and the controllers' are written at different times (the controllers once
// the API server is ready); together they are the whole control plane, each pod once.
func TestControlPlaneSplit(t *testing.T) {
	r := newTestRenderer(t)
	all, err := r.ControlPlaneManifests()
	if err != nil {
		t.Fatal(err)
	}
	api, err := r.APIServerManifest()
	if err != nil {
		t.Fatal(err)
	}
	later, err := r.ControllerManifests()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, append(api, later...).sorted()); diff != "" {
		t.Errorf("APIServerManifest + ControllerManifests differ from ControlPlaneManifests (-all +split):\n%s", diff)
	}
	if len(api) != 1 || api[0].Path != "/etc/kubernetes/manifests/kube-apiserver.yaml" {
		t.Errorf("APIServerManifest() = %v, want kube-apiserver.yaml alone", api)
	}
}

// Every PKI file a static pod's flags name must be one that PKI renders and must be mounted into that
// container: a component started without it exits, and the kubelet restarts it forever.
func TestManifestsNameRenderedPKIFiles(t *testing.T) {
	r := newTestRenderer(t)
	pki, err := r.PKI(testNow)
	if err != nil {
		t.Fatal(err)
	}
	rendered := map[string]bool{}
	for _, f := range pki {
		rendered[strings.TrimPrefix(f.Path, "/etc/kubernetes/pki/")] = true
	}
	etcd, _ := r.EtcdManifest(EtcdOptions{})
	cp, _ := r.ControlPlaneManifests()
	checked := 0
	for _, f := range append(Files{etcd}, cp...) {
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict(f.Data, &pod); err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		c := pod.Spec.Containers[0]
		for _, a := range c.Command {
			_, val, ok := strings.Cut(a, "=")
			if !ok || !strings.HasPrefix(val, containerPKIDir+"/") {
				continue
			}
			checked++
			if name := strings.TrimPrefix(val, containerPKIDir+"/"); !rendered[name] {
				t.Errorf("%s: %s names %s, which PKI does not render", pod.Name, a, name)
			}
			mounted := false
			for _, m := range c.VolumeMounts {
				mounted = mounted || val == m.MountPath || strings.HasPrefix(val, m.MountPath+"/")
			}
			if !mounted {
				t.Errorf("%s: %s is not mounted into the container", pod.Name, val)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d PKI flags, want the control plane's (at least 20)", checked)
	}
}
