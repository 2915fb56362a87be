//go:build integration

package sandboxtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandboxControlPlane is the fast full-stack test: machined in sandbox mode on this machine, in its
// own mount namespace, with the real containerd, kubelet (as a containerd container), etcd and
// control plane from the bundle, driven through cairnctl from Boot to a Ready node; then a SIGTERM must
// stop everything it started and give the host back the sysctls the kubelet changed.
//
// The volumes are tmpfs: this machine's kernel cannot read partition tables on loop devices, so the
// disk path is covered by machined/internal/disk's loop-device tests and by the QEMU e2e tests.
func TestSandboxControlPlane(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: mounts, containerd and the kubelet")
	}
	bundle, _ := filepath.Abs("../../_out/bundle")
	if _, err := os.Stat(filepath.Join(bundle, "images.tar")); err != nil {
		t.Fatalf("the Kubernetes bundle is not built (%v): run make bundle", err)
	}
	ip := hostIP(t)
	dir, root := t.TempDir(), t.TempDir()
	sysctls := readSysctls()
	must(t, dir, "gen", "config", "--cluster-name", "sbx", "--endpoint", "https://"+ip+":6443",
		"--state-disk", "tmpfs", "--ephemeral-disk", "tmpfs", "--etcd-disk", "tmpfs")

	// A private mount namespace with its own /run/containerd: containerd keeps its shims' sockets there
	// whatever its config says.
	script := fmt.Sprintf(`mount --make-rprivate / && mkdir -p /run/containerd && mount -t tmpfs tmpfs /run/containerd && exec %s --root %s --listen %s:50100 --join-listen %s:50101 --token t0k --bundle %s`,
		filepath.Join(bin, "machined"), root, ip, ip, bundle)
	cmd := exec.Command("unshare", "-m", "sh", "-c", script)
	logf, err := os.Create(filepath.Join(dir, "machined.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(3 * time.Minute):
				cmd.Process.Kill()
			}
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "machined.log"))
			t.Logf("machined's log:\n%s", tail(string(b), 60))
		}
	})
	node := ip + ":50100"
	waitListen(t, node)
	start := time.Now()
	out := must(t, dir, "--nodes", node, "--token", "t0k", "--insecure-skip-verify", "init", "--config", "controlplane.yaml")
	if !strings.Contains(out, "init finished") {
		t.Fatalf("init did not finish:\n%s", out)
	}
	t.Logf("init to Running (node Ready) in %s", time.Since(start).Round(time.Second))
	mtls := []string{"--nodes", node, "--cairnconfig", filepath.Join(dir, "cairnconfig")}
	health := must(t, dir, append(mtls, "health", "--wait", "2m")...)
	for _, want := range []string{"etcd", "apiserver", "control-plane-pods", "node"} {
		if !strings.Contains(health, want) {
			t.Errorf("health lacks %s:\n%s", want, health)
		}
	}
	must(t, dir, append(mtls, "kubeconfig", filepath.Join(dir, "kubeconfig"))...)
	kubectl := exec.Command(filepath.Join(bundle, "bin", "kube"), "kubectl", "--kubeconfig", filepath.Join(dir, "kubeconfig"), "get", "nodes", "--no-headers")
	nodes, err := kubectl.CombinedOutput()
	if err != nil || !strings.Contains(string(nodes), " Ready ") {
		t.Fatalf("kubectl get nodes: %v\n%s", err, nodes)
	}
	if out := must(t, dir, append(mtls, "logs", "kube-apiserver", "--tail", "5")...); strings.TrimSpace(out) == "" {
		t.Error("logs kube-apiserver printed nothing")
	}

	// SIGTERM: a clean shutdown that leaves nothing running and restores the host's sysctls.
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("machined exited with %v after SIGINT, want 0", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("machined did not stop within 3 minutes of SIGINT")
	}
	if left, _ := exec.Command("pgrep", "-f", "containerd-shim-runc-v2|kube-apiserver|etcd --").Output(); len(left) > 0 {
		t.Errorf("processes left after shutdown: %s", left)
	}
	if got := readSysctls(); got != sysctls {
		t.Errorf("host sysctls after shutdown = %q, want them restored to %q", got, sysctls)
	}
}

func hostIP(t *testing.T) string {
	c, err := net.Dial("udp", "192.0.2.1:9") // no packet is sent: this only picks the outgoing address
	if err != nil {
		t.Skipf("no network to run a control plane on: %v", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

func waitListen(t *testing.T, addr string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("machined did not listen on %s", addr)
}

func readSysctls() string {
	var vals []string
	for _, k := range []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"} {
		b, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		vals = append(vals, strings.TrimSpace(string(b)))
	}
	return strings.Join(vals, " ")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
