package kube

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/paths"
	corev1 "k8s.io/api/core/v1"
)

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *config.MachineConfig, n *Node)
		wantErr string
	}{
		{"no node name", func(_ *config.MachineConfig, n *Node) { n.Name = "" }, "node name"},
		{"no IP", func(_ *config.MachineConfig, n *Node) { n.IPs = nil }, "no IP address"},
		{"bad nodeIP", func(c *config.MachineConfig, _ *Node) { c.Machine.Kubelet.NodeIP = "x" }, "machine.kubelet.nodeIP"},
		{"endpoint not https", func(c *config.MachineConfig, _ *Node) { c.Cluster.Endpoint = "http://a:6443" }, "cluster.endpoint"},
		{"endpoint no host", func(c *config.MachineConfig, _ *Node) { c.Cluster.Endpoint = "https://:6443" }, "cluster.endpoint"},
		{"bad pod CIDR", func(c *config.MachineConfig, _ *Node) { c.Cluster.Network.PodCIDR = "10.0.0.0" }, "cluster.network.podCIDR"},
		{"tiny service CIDR", func(c *config.MachineConfig, _ *Node) { c.Cluster.Network.ServiceCIDR = "10.96.0.0/29" }, "serviceCIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, node := testConfig(t), testNode
			node.IPs = append([]netip.Addr(nil), testNode.IPs...)
			tt.mutate(cfg, &node)
			_, err := New(cfg, node, paths.Paths{}, DefaultImages())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New() error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestDerivedAddresses(t *testing.T) {
	tests := []struct {
		name                   string
		mutate                 func(c *config.MachineConfig)
		primary, svc, dns, url string
	}{
		{"defaults", func(*config.MachineConfig) {}, "192.168.50.10", "10.96.0.1", "10.96.0.10", "https://api.demo.example:6443"},
		{"nodeIP picks the second address", func(c *config.MachineConfig) { c.Machine.Kubelet.NodeIP = "10.0.2.15" },
			"10.0.2.15", "10.96.0.1", "10.96.0.10", "https://api.demo.example:6443"},
		{"empty network uses the defaults", func(c *config.MachineConfig) { c.Cluster.Network = config.ClusterNetwork{} },
			"192.168.50.10", "10.96.0.1", "10.96.0.10", "https://api.demo.example:6443"},
		{"endpoint without port", func(c *config.MachineConfig) {
			c.Cluster.Endpoint = "https://10.0.0.5"
			c.Cluster.Network.ServiceCIDR = "172.20.0.0/16"
		}, "192.168.50.10", "172.20.0.1", "172.20.0.10", "https://10.0.0.5:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			tt.mutate(cfg)
			r, err := New(cfg, testNode, paths.Paths{}, DefaultImages())
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got := [4]string{r.PrimaryIP().String(), r.APIServerServiceIP().String(), r.ClusterDNSIP().String(), r.endpoint}
			want := [4]string{tt.primary, tt.svc, tt.dns, tt.url}
			if got != want {
				t.Errorf("primary, service IP, DNS IP, endpoint = %v, want %v", got, want)
			}
		})
	}
}

func TestDefaultImagesMatchBundle(t *testing.T) {
	// images.txt is the bundle's list of what it built; it exists once `make bundle` ran.
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "_out", "bundle", "images.txt"))
	if err != nil {
		t.Skipf("no built bundle: %v", err)
	}
	img := DefaultImages()
	for _, name := range []string{img.APIServer, img.ControllerManager, img.Scheduler, img.Etcd, img.Pause, img.Kubelet} {
		if !strings.Contains(string(data), name+" ") {
			t.Errorf("DefaultImages() names %s, which the bundle does not carry", name)
		}
	}
}

// In sandbox mode every host path in every output must be under the root: one that is not would touch
// the machine the test runs on.
func TestSandboxPathsUnderRoot(t *testing.T) {
	const root = "/tmp/sbx"
	r := newRendererAt(t, root)
	under := func(what, p string) {
		t.Helper()
		if !strings.HasPrefix(p, root+"/") {
			t.Errorf("%s: host path %s is outside %s", what, p, root)
		}
	}
	etcd, _ := r.EtcdManifest(EtcdOptions{})
	cp, _ := r.ControlPlaneManifests()
	for _, f := range append(Files{etcd}, cp...) {
		under("manifest file", f.Path)
	}
	for pod, vols := range map[string][]corev1.Volume{
		Etcd:                  r.EtcdPod(EtcdOptions{}).Spec.Volumes,
		KubeAPIServer:         r.APIServerPod().Spec.Volumes,
		KubeControllerManager: r.ControllerManagerPod().Spec.Volumes,
		KubeScheduler:         r.SchedulerPod().Spec.Volumes,
	} {
		for _, v := range vols {
			under(pod+" hostPath", v.HostPath.Path)
		}
	}
	kc := r.KubeletConfiguration(KubeletOptions{})
	for what, p := range map[string]string{
		"staticPodPath": kc.StaticPodPath, "podLogsDir": kc.PodLogsDir, "clientCAFile": kc.Authentication.X509.ClientCAFile,
		"volumePluginDir": kc.VolumePluginDir, "containerRuntimeEndpoint": strings.TrimPrefix(kc.ContainerRuntimeEndpoint, "unix://"),
	} {
		under("kubelet "+what, p)
	}
	for _, m := range r.KubeletContainer(KubeletOptions{}).Mounts {
		if m.Source == "/dev" || m.Source == "/sys" {
			continue // the kernel's, shared by design
		}
		under("kubelet mount source", m.Source)
	}
	cni, _ := r.CNIConfig("10.244.0.0/24", CNIOptions{})
	under("CNI config", cni.Path)
	if !strings.Contains(string(cni.Data), root+"/var/lib/cni/networks") {
		t.Errorf("CNI IPAM dataDir is not under %s:\n%s", root, cni.Data)
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	files := Files{
		{Path: filepath.Join(dir, "etc/kubernetes/pki/ca.key"), Data: []byte("key"), Mode: 0o600},
		{Path: filepath.Join(dir, "etc/kubernetes/manifests/etcd.yaml"), Data: []byte("pod"), Mode: 0o644},
	}
	if err := WriteFiles(files); err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	for _, f := range files {
		st, err := os.Stat(f.Path)
		if err != nil {
			t.Fatalf("stat: %v", err)
		}
		data, _ := os.ReadFile(f.Path)
		if string(data) != string(f.Data) || st.Mode().Perm() != f.Mode {
			t.Errorf("%s = %q mode %v, want %q mode %v", f.Path, data, st.Mode().Perm(), f.Data, f.Mode)
		}
	}
	// Writing again replaces the content.
	files[0].Data = []byte("new key")
	if err := WriteFiles(files[:1]); err != nil {
		t.Fatalf("WriteFiles again: %v", err)
	}
	if data, _ := os.ReadFile(files[0].Path); string(data) != "new key" {
		t.Errorf("after a second write, content = %q, want %q", data, "new key")
	}
	if err := WriteFiles(Files{{Data: []byte("x")}}); err == nil {
		t.Errorf("WriteFiles(file without path) = nil, want an error")
	}
}
