//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// haTimeout bounds a create of three control planes: one Init and two control-plane joins, one after
// the other, with three emulated CPUs sharing the host's cores.
const haTimeout = 75 * time.Minute

// TestHA is three control planes made by `cluster create --controlplanes 3` (issue 6, `make e2e-ha`):
// the second and third join through the first, etcd reports three voting members, every node is a Ready
// control plane; then the first, which made the cluster, is powered off (its QEMU killed) and the API of
// the others still reads and writes. `make e2e` skips it: on a two-core host under TCG, three control
// planes (six emulated vCPUs) got as far as three voting etcd members and two Ready nodes, but the third
// API server kept exiting during its start (`logs --previous`: its own loopback TLS handshakes timed out,
// and the start-service-ip-repair-controllers post-start hook gave up).
func TestHA(t *testing.T) {
	if os.Getenv("CAIRN_E2E_HA") == "" {
		t.Skip("three control planes under TCG need more than two host cores: run `make e2e-ha` (CAIRN_E2E_HA=1)")
	}
	c := createCluster(t, "ha", haTimeout, "--controlplanes", "3")
	if len(c.Nodes) != 3 {
		t.Fatalf("cluster has %d nodes, want 3", len(c.Nodes))
	}
	for i, want := range []string{"init", "join", "join"} {
		if s := status(t, c.mtls(i)); s.State != "Running" || s.LockedBy != want {
			t.Errorf("node %s: status %+v, want Running, locked by %s", c.Nodes[i].Name, s, want)
		}
	}

	var members struct {
		Members []struct {
			Name      string `json:"name"`
			IsLearner bool   `json:"is_learner"`
		} `json:"members"`
	}
	ctlJSON(t, &members, append(c.mtls(2), "etcd", "members")...)
	var voters []string
	for _, m := range members.Members {
		if !m.IsLearner {
			voters = append(voters, m.Name)
		}
	}
	if want := c.Nodes[0].Name + "," + c.Nodes[1].Name + "," + c.Nodes[2].Name; strings.Join(voters, ",") != want {
		t.Fatalf("etcd voting members = %v (all: %+v), want %s", voters, members.Members, want)
	}

	kc := filepath.Join(c.Dir, "kubeconfig")
	for _, n := range c.Nodes {
		waitNodeReady(t, kc, n.Name)
	}
	cps := kubectl(t, kc, "get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "name")
	if got := strings.Count(cps, "node/"); got != 3 {
		t.Errorf("%d nodes labelled control-plane, want 3:\n%s", got, cps)
	}
	kubectl(t, kc, "create", "configmap", "before", "--from-literal=answer=1")

	// The second node's API server, through its own forwarded port.
	kc2 := filepath.Join(t.TempDir(), "kubeconfig-cp2")
	data, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	cp1Server := fmt.Sprintf("https://127.0.0.1:%d", c.Nodes[0].Ports[6443])
	cp2Server := fmt.Sprintf("https://127.0.0.1:%d", c.Nodes[1].Ports[6443])
	if !strings.Contains(string(data), cp1Server) {
		t.Fatalf("kubeconfig does not name the first node's API %s:\n%s", cp1Server, data)
	}
	if err := os.WriteFile(kc2, []byte(strings.ReplaceAll(string(data), cp1Server, cp2Server)), 0o600); err != nil {
		t.Fatal(err)
	}

	first := listCluster(t, c.Name).Nodes[0]
	if !first.Running || first.PID == 0 {
		t.Fatalf("the first node's QEMU does not run: %+v", first)
	}
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("power off %s (kill QEMU %d): %v", first.Name, first.PID, err)
	}
	waitExit(t, first.PID, time.Minute)
	t.Logf("powered off %s", first.Name)

	// Two of three members keep etcd's quorum: the API reads what was written before and takes writes.
	waitConfigMap(t, kc2, "before", "1")
	waitKubectl(t, kc2, 5*time.Minute, func(string) bool { return true }, "create", "configmap", "after", "--from-literal=answer=2")
	waitConfigMap(t, kc2, "after", "2")
	waitKubectl(t, kc2, 5*time.Minute, func(out string) bool { return strings.Contains(out, "Ready") },
		"get", "node", c.Nodes[2].Name, "--no-headers")
	if out := mustCtl(t, 2*time.Minute, append(c.mtls(1), "health")...); !strings.Contains(out, "etcd") {
		t.Errorf("health on %s after %s went away:\n%s", c.Nodes[1].Name, first.Name, out)
	}
}
