//go:build e2e

package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/config"
)

// checkApply changes the config of a Running lone control plane the way an operator would (issue 17):
// an immutable path is refused by name with nothing changed; a kubelet setting, a registry mirror and the
// node's labels and taints apply live (the kubelet's /configz shows the new value, containerd pulls through
// the new mirror without a reboot, the Node carries the label and the taint); a broken API server flag applied in try mode is undone by itself and the API serves again.
func checkApply(t *testing.T, c *cluster, kc, nodeName string) {
	mtls := c.mtls(0)
	base, err := os.ReadFile(c.nodeConfig(0))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, mod func(*config.MachineConfig)) string {
		cfg, err := config.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		mod(cfg)
		out, err := config.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(p, out, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// The mirror: containerd on the node reaches the host as 10.0.2.2 (QEMU's user network).
	mirror := newMirrorLog(t)
	const maxPods = 111
	live := func(cfg *config.MachineConfig) {
		cfg.Machine.Kubelet.MaxPods = maxPods
		cfg.Machine.Registries = map[string]config.Registry{"registry.invalid": {Mirrors: []string{"http://10.0.2.2:" + mirror.port}}}
		// PreferNoSchedule: the lone node still takes the pods of the steps after this one.
		cfg.Machine.NodeLabels = map[string]string{"example.com/rack": "r1"}
		cfg.Machine.NodeTaints = []config.NodeTaint{{Key: "example.com/e2e", Value: "applied", Effect: "PreferNoSchedule"}}
	}

	t.Run("immutable refused", func(t *testing.T) {
		f := write("immutable", func(cfg *config.MachineConfig) {
			live(cfg)
			cfg.Cluster.Network.PodCIDR = "10.250.0.0/16"
		})
		r := ctl(t, time.Minute, append(mtls, "apply", "--config", f)...)
		if r.err == nil || !strings.Contains(r.stderr, "InvalidArgument") || !strings.Contains(r.stderr, "cluster.network.podCIDR") {
			t.Fatalf("apply of a changed pod range = %v, want InvalidArgument naming cluster.network.podCIDR:\n%s", r.err, r)
		}
		if out := mustCtl(t, time.Minute, append(mtls, "get", "config")...); strings.Contains(out, "maxPods") {
			t.Errorf("a refused config changed the node's config:\n%.1500s", out)
		}
	})

	t.Run("kubelet and registry mirror live", func(t *testing.T) {
		out := mustCtl(t, 10*time.Minute, append(mtls, "apply", "--config", write("live", live))...)
		t.Logf("apply:\n%s", out)
		for _, want := range []string{"machine.kubelet.maxPods", "kubelet: healthy and the node Ready", "registries: containerd's hosts.toml",
			"machine.nodeTaints", "node labels and taints: on the Node", "applied: the config is in force"} {
			if !strings.Contains(out, want) {
				t.Errorf("apply output lacks %q", want)
			}
		}
		var cz struct {
			KubeletConfig struct {
				MaxPods int `json:"maxPods"`
			} `json:"kubeletconfig"`
		}
		raw := kubectl(t, kc, "get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/configz")
		if err := json.Unmarshal([]byte(raw[strings.Index(raw, "{"):]), &cz); err != nil || cz.KubeletConfig.MaxPods != maxPods {
			t.Errorf("kubelet /configz maxPods = %d (%v), want %d", cz.KubeletConfig.MaxPods, err, maxPods)
		}
		// The Node carries the label and the taint: a control plane put them on, since the kubelet may not.
		if got := kubectl(t, kc, "get", "node", nodeName, "-o", `jsonpath={.metadata.labels.example\.com/rack} {.spec.taints[?(@.key=="example.com/e2e")].value}`); strings.TrimSpace(got) != "r1 applied" {
			t.Errorf("Node %s: label example.com/rack and taint example.com/e2e = %q, want \"r1 applied\"", nodeName, got)
		}
		// An image of the mirrored registry is asked of the mirror.
		kubectl(t, kc, "run", "via-mirror", "--image=registry.invalid/cairn/probe:v1", "--restart=Never")
		deadline := time.Now().Add(3 * time.Minute)
		for !mirror.saw("/v2/cairn/probe/manifests/v1") && time.Now().Before(deadline) {
			time.Sleep(2 * time.Second)
		}
		if !mirror.saw("/v2/cairn/probe/manifests/v1") {
			t.Errorf("containerd never asked the new mirror for registry.invalid/cairn/probe:v1; the mirror saw %v", mirror.paths())
		}
		kubectl(t, kc, "delete", "pod", "via-mirror", "--wait=false")
	})

	t.Run("try with a broken API server flag is undone", func(t *testing.T) {
		f := write("broken", func(cfg *config.MachineConfig) {
			live(cfg)
			cfg.Cluster.APIServer.ExtraArgs = map[string]string{"cairn-no-such-flag": "1"}
		})
		r := ctl(t, 15*time.Minute, append(mtls, "apply", "--config", f, "--mode", "try", "--timeout", "2m")...)
		t.Logf("apply --mode try:\n%s", r)
		// The API server refuses the flag at once: the wait sees it crash-loop and says why, well before the
		// try's timeout.
		if r.err == nil || !strings.Contains(r.stderr, "previous config was put back") || !strings.Contains(r.stderr, "FailedPrecondition") ||
			!strings.Contains(r.stderr, "crash loop") || !strings.Contains(r.stderr, "unknown flag: --cairn-no-such-flag") {
			t.Errorf("apply of a broken API server flag = %v, want FailedPrecondition, the crash loop with the API server's own error, and the previous config put back", r.err)
		}
		mustCtl(t, 10*time.Minute, append(mtls, "health")...)
		kubectl(t, kc, "get", "nodes")
		if ev := mustCtl(t, time.Minute, append(mtls, "events")...); !strings.Contains(ev, "failed and was undone") {
			t.Errorf("no event says the change was undone:\n%s", tailString(ev, 3000))
		}
		hist := mustCtl(t, time.Minute, append(mtls, "config", "history")...)
		t.Logf("config history:\n%s", hist)
		if !strings.Contains(hist, "2*") || !strings.Contains(hist, "machine.kubelet.maxPods") || strings.Contains(hist, "cairn-no-such-flag") {
			t.Errorf("config history does not show the live change as generation 2, in force, and nothing of the undone try")
		}
	})
}

// mirrorLog is a registry mirror that has nothing: it logs what it was asked and answers 404.
type mirrorLog struct {
	port string
	mu   sync.Mutex
	got  []string
}

func newMirrorLog(t *testing.T) *mirrorLog {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &mirrorLog{}
	_, m.port, _ = net.SplitHostPort(l.Addr().String())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.got = append(m.got, r.URL.Path)
		m.mu.Unlock()
		http.NotFound(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return m
}

func (m *mirrorLog) saw(path string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.got {
		if p == path {
			return true
		}
	}
	return false
}

func (m *mirrorLog) paths() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.got...)
}
