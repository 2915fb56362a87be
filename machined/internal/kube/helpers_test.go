package kube

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testNow is the fixed time of every test; certificates are signed at it.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var (
	secretsOnce sync.Once
	secrets     *config.Secrets
	secretsErr  error
)

// testSecrets are one generated cluster's secrets, shared by the tests (generating them is the slow part).
func testSecrets(t *testing.T) *config.Secrets {
	t.Helper()
	secretsOnce.Do(func() { secrets, secretsErr = config.GenerateSecrets(testNow.Add(-time.Hour)) })
	if secretsErr != nil {
		t.Fatalf("GenerateSecrets: %v", secretsErr)
	}
	s := *secrets
	s.BootstrapToken = "abcdef.0123456789abcdef" // fixed, so goldens that show it are stable
	return &s
}

// testConfig is a control-plane config with settings in every field rendering reads.
func testConfig(t *testing.T) *config.MachineConfig {
	t.Helper()
	s := testSecrets(t)
	return &config.MachineConfig{
		APIVersion: config.APIVersion,
		Kind:       config.KindMachineConfig,
		Machine: config.Machine{
			Type:       config.TypeControlPlane,
			Kubelet:    config.Kubelet{MaxPods: 150, ExtraArgs: map[string]string{"v": "2"}},
			NodeTaints: []config.NodeTaint{{Key: "dedicated", Value: "infra", Effect: "NoSchedule"}},
		},
		Cluster: config.Cluster{
			Name:     "demo",
			ID:       "0123456789abcdef",
			Endpoint: "https://api.demo.example:6443",
			Network: config.ClusterNetwork{
				PodCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12", DNSDomain: "cluster.local", NodeCIDRMaskSize: 24,
			},
			MachineCA: s.MachineCA.Cert,
			Secrets:   s,
			APIServer: config.Component{
				CertSANs:  []string{"lb.demo.example", "203.0.113.7"},
				ExtraArgs: map[string]string{"audit-log-maxage": "7", "allow-privileged": "false"},
			},
			ControllerManager: config.Component{ExtraArgs: map[string]string{"node-monitor-grace-period": "20s"}},
			Scheduler:         config.Component{ExtraArgs: map[string]string{"leader-elect": "false"}},
			Etcd:              config.Etcd{QuotaBackendBytes: 4 << 30, ExtraArgs: map[string]string{"auto-compaction-retention": "8"}},
		},
	}
}

var testNode = Node{Name: "cp-1", IPs: []netip.Addr{netip.MustParseAddr("192.168.50.10"), netip.MustParseAddr("10.0.2.15")}}

// newTestRenderer renders for testNode with the real node's layout ("/").
func newTestRenderer(t *testing.T) *Renderer {
	t.Helper()
	return newRendererAt(t, "/")
}

func newRendererAt(t *testing.T, root string) *Renderer {
	t.Helper()
	r, err := New(testConfig(t), testNode, paths.Paths{Root: root}, DefaultImages())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (-want +got):\n%s", name, cmp.Diff(string(want), string(got)))
	}
}
