package kube

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCNIConfigGolden(t *testing.T) {
	for _, tt := range []struct {
		name, root, golden string
		opts               CNIOptions
	}{
		{"node", "/", "cni/10-cairn.conflist", CNIOptions{}},
		{"no masquerade in sandbox", "/tmp/sbx", "cni/10-cairn-nomasq.conflist", CNIOptions{NoMasquerade: true, MTU: 1450}},
		// With flannel: its vxlan MTU, no per-node masquerade, host ports kept.
		{"flannel", "/", "cni/10-cairn-flannel.conflist", CNIOptions{ClusterMasquerade: true, MTU: 1450}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := newRendererAt(t, tt.root).CNIConfig("10.244.3.0/24", tt.opts)
			if err != nil {
				t.Fatalf("CNIConfig: %v", err)
			}
			if want := strings.TrimSuffix(tt.root, "/") + "/etc/cni/net.d/10-cairn.conflist"; f.Path != want {
				t.Errorf("CNIConfig().Path = %q, want %q", f.Path, want)
			}
			if !json.Valid(f.Data) {
				t.Errorf("CNIConfig() is not valid JSON:\n%s", f.Data)
			}
			golden(t, tt.golden, f.Data)
		})
	}
}

func TestCNIConfigErrors(t *testing.T) {
	r := newTestRenderer(t)
	for _, tt := range []struct{ cidr, wantErr string }{
		{"", "node podCIDR"},
		{"10.244.3.0", "node podCIDR"},
		{"10.245.0.0/24", "not inside the cluster's pod CIDR"},
		{"10.0.0.0/8", "not inside the cluster's pod CIDR"},
	} {
		if _, err := r.CNIConfig(tt.cidr, CNIOptions{}); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("CNIConfig(%q) error = %v, want one mentioning %q", tt.cidr, err, tt.wantErr)
		}
	}
}
