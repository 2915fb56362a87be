package pin

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

var update = flag.Bool("update", false, "rewrite golden files")

var v = versions.Versions{Kubernetes: "v1.37.2", Etcd: "v3.6.16", CoreDNS: "v1.15.0", Flannel: "v0.28.10", Containerd: "v2.4.2"}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

func TestRenderKube(t *testing.T) {
	src, err := os.ReadFile("testdata/kubernetes.go.mod")
	if err != nil {
		t.Fatal(err)
	}
	got, err := RenderKube(src, v)
	if err != nil {
		t.Fatalf("RenderKube() error = %v", err)
	}
	golden(t, "kube.go.mod.golden", got)
	// What we render must itself pass the check the build runs.
	if err := CheckKube(got, v); err != nil {
		t.Errorf("CheckKube(RenderKube()) = %v, want nil", err)
	}
}

func TestRenderEtcd(t *testing.T) {
	golden(t, "etcd.go.mod.golden", RenderEtcd(v))
}

// PinKubernetes pins back what CoreDNS or flannel raised among the modules the
// Kubernetes components link, and nothing else: not a module only CoreDNS
// links (though k8s.io/kubernetes requires it for kubeadm), not one at
// Kubernetes' version, not a staging module (already replaced).
func TestPinKubernetes(t *testing.T) {
	k8s := []byte(`module k8s.io/kubernetes

require (
	google.golang.org/grpc v1.82.1
	golang.org/x/net v0.57.0
	github.com/spf13/cobra v1.10.2
	github.com/coredns/caddy v1.1.1
	k8s.io/api v0.0.0
)
`)
	tidied := []byte(`module github.com/cairn-os/cairn/image/bundle/kube

require (
	github.com/coredns/coredns v1.15.0
	github.com/flannel-io/flannel v0.28.10
	k8s.io/kubernetes v1.37.2
)

replace k8s.io/api => k8s.io/api v0.37.2

replace github.com/mwitkow/go-conntrack => ./conntrack
`)
	selected := map[string]string{
		"google.golang.org/grpc":     "v1.84.0",
		"golang.org/x/net":           "v0.60.0",
		"github.com/spf13/cobra":     "v1.10.2",
		"k8s.io/api":                 "v0.37.2",
		"github.com/miekg/dns":       "v1.1.73",
		"github.com/coredns/coredns": "v1.15.0",
		"github.com/coredns/caddy":   "v1.1.4",
	}
	linked := map[string]bool{"google.golang.org/grpc": true, "golang.org/x/net": true, "github.com/spf13/cobra": true, "k8s.io/api": true}
	got, n, err := PinKubernetes(tidied, k8s, selected, linked)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("PinKubernetes pinned %d modules, want 2", n)
	}
	golden(t, "kube-pinned.go.mod.golden", got)
	if err := CheckKube(got, v); err != nil {
		t.Errorf("CheckKube(pinned) = %v, want nil", err)
	}
	if got, n, err := PinKubernetes(tidied, k8s, map[string]string{"google.golang.org/grpc": "v1.82.1"}, linked); err != nil || n != 0 || string(got) != string(tidied) {
		t.Errorf("PinKubernetes(nothing raised) = %q, %d, %v; want the go.mod unchanged", got, n, err)
	}
}

func TestRenderContainerd(t *testing.T) {
	golden(t, "containerd.go.mod.golden", RenderContainerd(v))
}

func TestStagingModulesNone(t *testing.T) {
	_, err := StagingModules([]byte("module k8s.io/kubernetes\n"))
	if err == nil || !strings.Contains(err.Error(), "no replace") {
		t.Errorf("StagingModules(no replaces) error = %v, want 'no replace'", err)
	}
}

func TestCheck(t *testing.T) {
	src, _ := os.ReadFile("testdata/kubernetes.go.mod")
	kube, err := RenderKube(src, v)
	if err != nil {
		t.Fatal(err)
	}
	newer := v
	newer.Kubernetes, newer.Etcd, newer.CoreDNS, newer.Flannel, newer.Containerd = "v1.37.3", "v3.6.17", "v1.15.1", "v0.28.11", "v2.4.3"
	tests := []struct {
		name    string
		err     error
		wantErr string
	}{
		{"kube matches", CheckKube(kube, v), ""},
		{"kube behind versions.env", CheckKube(kube, newer), "requires k8s.io/kubernetes v1.37.2 but versions.env says v1.37.3"},
		{"kube staging mismatch", CheckKube([]byte(strings.Replace(string(kube), "k8s.io/api v0.37.2", "k8s.io/api v0.37.1", 1)), v),
			"replaces k8s.io/api with v0.37.1, want v0.37.2"},
		{"etcd matches", CheckEtcd(RenderEtcd(v), v), ""},
		{"etcd behind versions.env", CheckEtcd(RenderEtcd(v), newer), "requires go.etcd.io/etcd/server/v3 v3.6.16 but versions.env says v3.6.17"},
		{"etcd require missing", CheckEtcd([]byte("module x\n"), v), "does not require go.etcd.io/etcd/server/v3"},
		{"etcdutl require missing", CheckEtcd([]byte("module x\nrequire go.etcd.io/etcd/server/v3 v3.6.16\n"), v), "does not require go.etcd.io/etcd/etcdutl/v3"},
		{"kube coredns behind versions.env", CheckKube(kube, func() versions.Versions { n := v; n.CoreDNS = "v1.15.1"; return n }()),
			"requires github.com/coredns/coredns v1.15.0 but versions.env says v1.15.1"},
		{"kube coredns missing", CheckKube([]byte(strings.Replace(string(kube), "\tgithub.com/coredns/coredns v1.15.0\n", "", 1)), v),
			"does not require github.com/coredns/coredns"},
		{"kube flannel behind versions.env", CheckKube(kube, func() versions.Versions { n := v; n.Flannel = "v0.28.11"; return n }()),
			"requires github.com/flannel-io/flannel v0.28.10 but versions.env says v0.28.11"},
		{"kube flannel missing", CheckKube([]byte(strings.Replace(string(kube), "\tgithub.com/flannel-io/flannel v0.28.10\n", "", 1)), v),
			"does not require github.com/flannel-io/flannel"},
		{"containerd matches", CheckContainerd(RenderContainerd(v), v), ""},
		{"containerd behind versions.env", CheckContainerd(RenderContainerd(v), newer), "requires github.com/containerd/containerd/v2 v2.4.2 but versions.env says v2.4.3"},
		{"containerd require missing", CheckContainerd([]byte("module x\n"), v), "does not require github.com/containerd/containerd/v2"},
		{"kube stand-in missing", CheckKube([]byte(strings.Replace(string(kube), "=> ./conntrack", "=> ./elsewhere", 1)), v),
			"does not replace github.com/mwitkow/go-conntrack by ./conntrack"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantErr == "" {
				if tt.err != nil {
					t.Errorf("check = %v, want nil", tt.err)
				}
				return
			}
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.wantErr) {
				t.Errorf("check = %v, want it to contain %q", tt.err, tt.wantErr)
			}
		})
	}
}

// The committed wrapper modules must pin what versions.env says; otherwise
// `make bundle` would refuse to build. Run `go run ./cmd/bundle pin` to fix.
func TestCommittedModulesMatchVersions(t *testing.T) {
	root := filepath.Join("..", "..")
	v, err := versions.Load(filepath.Join(root, "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	kube, err := os.ReadFile(filepath.Join(root, "kube", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckKube(kube, v); err != nil {
		t.Error(err)
	}
	etcd, err := os.ReadFile(filepath.Join(root, "etcd", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckEtcd(etcd, v); err != nil {
		t.Error(err)
	}
	containerd, err := os.ReadFile(filepath.Join(root, "containerd", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckContainerd(containerd, v); err != nil {
		t.Error(err)
	}
}
