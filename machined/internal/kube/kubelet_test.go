package kube

import (
	corev1 "k8s.io/api/core/v1"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

func TestKubeletConfigGolden(t *testing.T) {
	tests := []struct {
		name     string
		root     string
		opts     KubeletOptions
		wantPath string
		golden   string
	}{
		{"node", "/", KubeletOptions{}, "/var/lib/kubelet/config.yaml", "kubelet/config.yaml"},
		{"sandbox", "/tmp/sbx", KubeletOptions{AllowCgroupV1: true}, "/tmp/sbx/var/lib/kubelet/config.yaml", "kubelet/config-sandbox.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := newRendererAt(t, tt.root).KubeletConfig(tt.opts)
			if err != nil {
				t.Fatalf("KubeletConfig: %v", err)
			}
			if f.Path != tt.wantPath {
				t.Errorf("KubeletConfig().Path = %q, want %q", f.Path, tt.wantPath)
			}
			golden(t, tt.golden, f.Data)
		})
	}
}

// What the kubelet reads back must be what we meant: decoded strictly into the kubelet's own type, a
// misspelt field fails instead of silently vanishing.
func TestKubeletConfigDecodes(t *testing.T) {
	f, err := newTestRenderer(t).KubeletConfig(KubeletOptions{AllowCgroupV1: true})
	if err != nil {
		t.Fatalf("KubeletConfig: %v", err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(f.Data, &kc); err != nil {
		t.Fatalf("decode: %v", err)
	}
	got := map[string]any{
		"cgroupDriver":             kc.CgroupDriver,
		"failCgroupV1":             *kc.FailCgroupV1,
		"staticPodPath":            kc.StaticPodPath,
		"clusterDNS":               kc.ClusterDNS,
		"clusterDomain":            kc.ClusterDomain,
		"clientCAFile":             kc.Authentication.X509.ClientCAFile,
		"webhookAuthn":             *kc.Authentication.Webhook.Enabled,
		"anonymous":                *kc.Authentication.Anonymous.Enabled,
		"authorization":            string(kc.Authorization.Mode),
		"rotateCertificates":       kc.RotateCertificates,
		"serverTLSBootstrap":       kc.ServerTLSBootstrap,
		"containerRuntimeEndpoint": kc.ContainerRuntimeEndpoint,
		"healthz":                  kc.HealthzBindAddress,
		"healthzPort":              *kc.HealthzPort,
		"maxPods":                  kc.MaxPods,
		"resolvConf":               *kc.ResolverConfig,
		"serializeImagePulls":      *kc.SerializeImagePulls,
		"maxParallelImagePulls":    *kc.MaxParallelImagePulls,
		"registerWithTaints":       kc.RegisterWithTaints,
	}
	want := map[string]any{
		"cgroupDriver":             "cgroupfs",
		"failCgroupV1":             false,
		"staticPodPath":            "/etc/kubernetes/manifests",
		"clusterDNS":               []string{"10.96.0.10"},
		"clusterDomain":            "cluster.local",
		"clientCAFile":             "/etc/kubernetes/pki/ca.crt",
		"webhookAuthn":             true,
		"anonymous":                false,
		"authorization":            "Webhook",
		"rotateCertificates":       true,
		"serverTLSBootstrap":       true,
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"healthz":                  "127.0.0.1",
		"healthzPort":              int32(10248),
		"maxPods":                  int32(150),
		"resolvConf":               "/etc/resolv.conf",
		"serializeImagePulls":      false,
		"maxParallelImagePulls":    int32(4),
		"registerWithTaints":       []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded kubelet config (-want +got):\n%s", diff)
	}
}

func TestKubeletFailCgroupV1Default(t *testing.T) {
	kc := newTestRenderer(t).KubeletConfiguration(KubeletOptions{})
	if !kc.FailCgroupV1 {
		t.Errorf("KubeletConfiguration(zero options).FailCgroupV1 = %v, want true (the kubelet's own default)", kc.FailCgroupV1)
	}
}

func TestKubeletArgs(t *testing.T) {
	tests := []struct {
		name  string
		root  string
		opts  KubeletOptions
		extra map[string]string
		want  []string
	}{
		{
			name: "control plane",
			root: "/",
			want: []string{
				"--cert-dir=/var/lib/kubelet/pki", "--config=/var/lib/kubelet/config.yaml", "--hostname-override=cp-1",
				"--kubeconfig=/etc/kubernetes/kubelet.conf", "--node-ip=192.168.50.10",
				"--root-dir=/var/lib/kubelet", "--v=2",
			},
		},
		{
			name:  "worker in sandbox, extraArgs override",
			root:  "/tmp/sbx",
			opts:  KubeletOptions{Bootstrap: true},
			extra: map[string]string{"node-ip": "10.0.2.15", "node-labels": "zone=a"},
			want: []string{
				"--bootstrap-kubeconfig=/tmp/sbx/etc/kubernetes/bootstrap-kubelet.conf",
				"--cert-dir=/tmp/sbx/var/lib/kubelet/pki",
				"--config=/tmp/sbx/var/lib/kubelet/config.yaml", "--hostname-override=cp-1",
				"--kubeconfig=/tmp/sbx/etc/kubernetes/kubelet.conf", "--node-ip=10.0.2.15",
				"--root-dir=/tmp/sbx/var/lib/kubelet", "--node-labels=zone=a",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRendererAt(t, tt.root)
			if tt.extra != nil {
				r.cfg.Machine.Kubelet.ExtraArgs = tt.extra
			}
			if diff := cmp.Diff(tt.want, r.KubeletArgs(tt.opts)); diff != "" {
				t.Errorf("KubeletArgs (-want +got):\n%s", diff)
			}
		})
	}
}
