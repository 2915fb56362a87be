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
// control plane from the payload, driven through cairnctl from Boot to a Ready node; then a SIGTERM must
// stop everything it started and give the host back the sysctls the kubelet changed.
//
// The volumes are tmpfs: this machine's kernel cannot read partition tables on loop devices, so the
// disk path is covered by machined/internal/disk's loop-device tests and by the QEMU e2e tests.
//
// The node has a network namespace of its own, reached over a veth pair: the add-ons it runs (kube-proxy's
// nftables tables, flannel's vxlan device and tables, the pods' bridge) would otherwise be made in the
// host's, and outlive the test there.
func TestSandboxControlPlane(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: mounts, containerd and the kubelet")
	}
	bundle, _ := filepath.Abs("../../_out/bundle")
	payloadDir, _ := filepath.Abs("../../_out/payload")
	if _, err := os.Stat(filepath.Join(payloadDir, "images", "index.json")); err != nil {
		t.Fatalf("the Kubernetes payload is not built (%v): run make payload", err)
	}
	ns, ip := nodeNetns(t)
	dir, root := t.TempDir(), t.TempDir()
	sysctls := readSysctls()
	must(t, dir, "gen", "config", "--cluster-name", "sbx", "--endpoint", "https://"+ip+":6443",
		"--state-disk", "tmpfs", "--ephemeral-disk", "tmpfs", "--etcd-disk", "tmpfs")

	// A private mount namespace with its own /run/containerd: containerd keeps its shims' sockets there
	// whatever its config says, and /run/netns, where it pins the pods' network namespaces. nsenter, not ip netns exec: that one mounts a fresh sysfs over /sys,
	// hiding the host's cgroup hierarchies that runc and the kubelet need.
	script := fmt.Sprintf(`mount --make-rprivate / && mkdir -p /run/containerd /run/netns && mount -t tmpfs tmpfs /run/containerd && mount -t tmpfs tmpfs /run/netns && exec %s --root %s --listen %s:50100 --join-listen %s:50101 --token t0k --payload %s`,
		filepath.Join(bin, "machined"), root, ip, ip, payloadDir)
	cmd := exec.Command("nsenter", "--net=/run/netns/"+ns, "unshare", "-m", "sh", "-c", script)
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
	t.Logf("init to Running (node Ready) in %s:\n%s", time.Since(start).Round(time.Second), out)
	mtls := []string{"--nodes", node, "--cairnconfig", filepath.Join(dir, "cairnconfig")}
	health := must(t, dir, append(mtls, "health", "--wait", "2m")...)
	for _, want := range []string{"etcd", "apiserver", "control-plane-pods", "node"} {
		if !strings.Contains(health, want) {
			t.Errorf("health lacks %s:\n%s", want, health)
		}
	}
	must(t, dir, append(mtls, "kubeconfig", filepath.Join(dir, "kubeconfig"))...)
	kubectl := exec.Command(filepath.Join(bundle, "bin", "kubectl"), "--kubeconfig", filepath.Join(dir, "kubeconfig"), "get", "nodes", "--no-headers")
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
	// A shim whose container was killed may still be on its way out when machined returns (it is not
	// machined's child): it gets a few seconds; one still there then was left behind.
	var left []byte
	for range 10 {
		if left, _ = exec.Command("pgrep", "-a", "-f", "containerd-shim-runc-v2|kube-apiserver|etcd --").Output(); len(left) == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	if len(left) > 0 {
		t.Errorf("processes left after shutdown: %s", left)
	}
	if got := readSysctls(); got != sysctls {
		t.Errorf("host sysctls after shutdown = %q, want them restored to %q", got, sysctls)
	}
}

// nodeNetns makes the node's network namespace, joined to the host's by a veth pair (the host's end
// 10.231.0.1, the node's 10.231.0.2, its default route through the host's end), and returns its name and
// the node's address. Deleting it at the end takes with it everything the node made in it.
func nodeNetns(t *testing.T) (name, nodeIP string) {
	t.Helper()
	name = fmt.Sprintf("cairn-sbx-%d", os.Getpid())
	host, peer := fmt.Sprintf("csbx%dh", os.Getpid()%100000), "eth0"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", name)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "delete", host).Run()
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", name, err, out)
		}
	})
	run("link", "add", host, "type", "veth", "peer", "name", peer, "netns", name)
	run("addr", "add", "10.231.0.1/24", "dev", host)
	run("link", "set", host, "up")
	run("-n", name, "link", "set", "lo", "up")
	run("-n", name, "addr", "add", "10.231.0.2/24", "dev", peer)
	run("-n", name, "link", "set", peer, "up")
	run("-n", name, "route", "add", "default", "via", "10.231.0.1")
	return name, "10.231.0.2"
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
