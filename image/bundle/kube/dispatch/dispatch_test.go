package dispatch

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var known = []string{"kube-apiserver", "kubelet", "kubectl"}

func TestResolve(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		wantName string
		wantArgs []string
		wantErr  string
	}{
		{"symlink", []string{"/usr/local/bin/kube-apiserver", "--etcd-servers=x"}, "kube-apiserver", []string{"kube-apiserver", "--etcd-servers=x"}, ""},
		{"bare symlink name", []string{"kubectl"}, "kubectl", []string{"kubectl"}, ""},
		{"first argument", []string{"/usr/local/bin/kube", "kubelet", "--version"}, "kubelet", []string{"kubelet", "--version"}, ""},
		// A symlink wins over the first argument: `kubectl kubelet` is kubectl
		// looking for a plugin named kubelet, not the kubelet.
		{"symlink beats argument", []string{"kubectl", "kubelet"}, "kubectl", []string{"kubectl", "kubelet"}, ""},
		{"unknown component", []string{"kube", "kube-dns"}, "", nil, `unknown component "kube-dns"`},
		{"no component", []string{"kube"}, "", nil, "no component given"},
		{"flag instead of component", []string{"kube", "--version"}, "", nil, `unknown component "--version"`},
		{"empty argv", nil, "", nil, "empty argv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, args, err := Resolve(tt.argv, known)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%q) error = %v, want it to contain %q", tt.argv, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), "kube-apiserver, kubectl, kubelet") {
					t.Errorf("Resolve(%q) error = %v, want it to list the components", tt.argv, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q) error = %v", tt.argv, err)
			}
			if name != tt.wantName {
				t.Errorf("Resolve(%q) name = %q, want %q", tt.argv, name, tt.wantName)
			}
			if diff := cmp.Diff(tt.wantArgs, args); diff != "" {
				t.Errorf("Resolve(%q) args mismatch (-want +got):\n%s", tt.argv, diff)
			}
		})
	}
}
