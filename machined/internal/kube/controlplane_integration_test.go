//go:build integration

package kube

// TestControlPlaneProcesses runs the rendered control plane for real, as plain processes of the built
// bundle in a throwaway network namespace (no containerd, no kubelet: those are the sandbox test's):
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler with exactly the rendered flags and
// PKI (only the /etc/kubernetes and /var/lib/etcd prefixes are moved under a temporary root, where the
// pods would see them through their hostPath mounts). It proves what a user would notice first: the
// API answers with the admin kubeconfig, the components authenticate with theirs, the bootstrap
// objects are accepted and give the bootstrap token its rights, and the controller-manager hands a new
// node a PodCIDR that the CNI config renders from.

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/paths"
)

const cpTestIP = "10.99.0.1"

type netnsRunner struct {
	t    *testing.T
	name string
	bin  string
}

// cmd runs a program of the bundle inside the namespace.
func (n *netnsRunner) cmd(prog string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.name, filepath.Join(n.bin, prog)}, args...)...)
}

// kubectl returns kubectl's standard output (warnings go to its standard error), or its error output.
func (n *netnsRunner) kubectl(kubeconfig string, args ...string) (string, error) {
	c := n.cmd("kubectl", append([]string{"--kubeconfig", kubeconfig, "--request-timeout=10s"}, args...)...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return strings.TrimSpace(string(out) + stderr.String()), err
	}
	return strings.TrimSpace(string(out)), nil
}

func TestControlPlaneProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	bin := filepath.Join(bundleDir(t), "bin")
	start := time.Now()

	ns := &netnsRunner{t: t, name: fmt.Sprintf("cairn-kube-test-%d", os.Getpid()), bin: bin}
	if out, err := exec.Command("ip", "netns", "add", ns.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns.name).Run() })
	for _, args := range [][]string{
		{"-n", ns.name, "link", "set", "lo", "up"},
		{"-n", ns.name, "addr", "add", cpTestIP + "/32", "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}

	root, err := os.MkdirTemp("", "kcp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	cfg := testConfig(t)
	cfg.Cluster.Endpoint = "https://" + cpTestIP + ":6443"
	cfg.Cluster.Scheduler.ExtraArgs = nil // the shared test config turns leader election off; the lease proves it runs
	r, err := New(cfg, Node{Name: "cp-1", IPs: []netip.Addr{netip.MustParseAddr(cpTestIP)}}, paths.Paths{Root: root}, DefaultImages())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	pkiFiles, err := r.PKI(now)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigs, err := r.Kubeconfigs(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(append(pkiFiles, kubeconfigs...)); err != nil {
		t.Fatal(err)
	}

	// Start each component with its rendered command, paths moved under root.
	relocate := strings.NewReplacer(containerKubernetesDir, r.Layout().Kubernetes(), containerEtcdDataDir, r.Layout().EtcdData())
	for _, pod := range []struct {
		name, prog string
		cmd        []string
	}{
		{Etcd, "etcd", r.EtcdPod(EtcdOptions{}).Spec.Containers[0].Command},
		{KubeAPIServer, "kube", r.APIServerPod().Spec.Containers[0].Command},
		{KubeControllerManager, "kube", r.ControllerManagerPod().Spec.Containers[0].Command},
		{KubeScheduler, "kube", r.SchedulerPod().Spec.Containers[0].Command},
	} {
		args := make([]string, 0, len(pod.cmd))
		for _, a := range pod.cmd {
			args = append(args, relocate.Replace(a))
		}
		if pod.prog == "etcd" {
			args = args[1:]
		}
		startProcess(t, ns.cmd(pod.prog, args...), filepath.Join(root, pod.name+".log"))
	}

	admin := r.Layout().KubernetesFile(AdminConf)
	waitFor(t, "kube-apiserver /readyz", 3*time.Minute, root, func() (bool, string) {
		out, err := ns.kubectl(admin, "get", "--raw", "/readyz")
		return err == nil && out == "ok", out
	})
	t.Logf("kube-apiserver ready after %v", time.Since(start).Round(time.Second))

	if out, err := ns.kubectl(admin, "auth", "can-i", "*", "*"); err != nil || out != "yes" {
		t.Errorf("admin.conf: can-i * * = %q, %v; want yes (system:masters)", out, err)
	}

	// The controller-manager and the scheduler are up and authorized when they hold their leases.
	for _, lease := range []string{KubeControllerManager, KubeScheduler} {
		waitFor(t, lease+" leader lease", 2*time.Minute, root, func() (bool, string) {
			out, err := ns.kubectl(admin, "-n", "kube-system", "get", "lease", lease, "-o", "jsonpath={.spec.holderIdentity}")
			return err == nil && out != "", out
		})
	}
	t.Logf("controller-manager and scheduler lead after %v", time.Since(start).Round(time.Second))

	// The bootstrap objects are valid API objects, and they give the token what a joining kubelet needs.
	objs, err := r.BootstrapObjects(BootstrapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		data, err := o.JSON()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, "obj-"+strings.ReplaceAll(o.Name, ":", "_")+".json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := ns.kubectl(admin, "create", "-f", path); err != nil {
			t.Errorf("create %s: %v\n%s", o.ItemPath(), err, out)
		}
	}
	bootstrap, err := r.WorkerFiles([]byte(cfg.Cluster.Secrets.KubernetesCA.Cert), cfg.Cluster.Secrets.BootstrapToken)
	if err != nil {
		t.Fatal(err)
	}
	// Keep it away from the control plane's files; only the kubeconfig matters here.
	bootstrapConf := filepath.Join(root, "bootstrap-kubelet.conf")
	if err := os.WriteFile(bootstrapConf, bootstrap.Get(r.Layout().KubernetesFile(BootstrapKubeletConf)).Data, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "bootstrap token may create CSRs", time.Minute, root, func() (bool, string) {
		out, err := ns.kubectl(bootstrapConf, "auth", "can-i", "create", "certificatesigningrequests")
		return err == nil && out == "yes", out
	})
	if out, _ := ns.kubectl(bootstrapConf, "auth", "can-i", "list", "secrets", "-A"); out != "no" {
		t.Errorf("bootstrap token: can-i list secrets = %q, want no", out)
	}

	// A node gets a PodCIDR from the controller-manager, and the CNI config renders from it.
	nodeJSON := filepath.Join(root, "node.json")
	if err := os.WriteFile(nodeJSON, []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"cp-1"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := ns.kubectl(admin, "create", "-f", nodeJSON); err != nil {
		t.Fatalf("create node: %v\n%s", err, out)
	}
	var podCIDR string
	waitFor(t, "node PodCIDR", time.Minute, root, func() (bool, string) {
		out, err := ns.kubectl(admin, "get", "node", "cp-1", "-o", "jsonpath={.spec.podCIDR}")
		podCIDR = out
		return err == nil && out != "", out
	})
	if _, err := r.CNIConfig(podCIDR, CNIOptions{}); err != nil {
		t.Errorf("CNIConfig(%q) from the allocated PodCIDR: %v", podCIDR, err)
	}
	if p := netip.MustParsePrefix(podCIDR); p.Bits() != 24 {
		t.Errorf("allocated PodCIDR %s, want a /24 (cluster.network.nodeCIDRMaskSize)", podCIDR)
	}
	t.Logf("control plane checked in %v", time.Since(start).Round(time.Second))
}

// startProcess starts cmd with its output in logPath and stops it (and its children) at cleanup.
func startProcess(t *testing.T, cmd *exec.Cmd, logPath string) {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logFile.Close()
	})
}

// waitFor polls check every second until it is true; on timeout it fails with the components' logs.
func waitFor(t *testing.T, what string, timeout time.Duration, root string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, out := check()
		if ok {
			return
		}
		last = out
		if time.Now().After(deadline) {
			logs, _ := filepath.Glob(filepath.Join(root, "*.log"))
			var b strings.Builder
			for _, l := range logs {
				data, _ := os.ReadFile(l)
				fmt.Fprintf(&b, "==> %s\n%s\n", filepath.Base(l), tail(string(data)))
			}
			t.Fatalf("%s: not within %v (last: %q)\n%s", what, timeout, last, b.String())
		}
		time.Sleep(time.Second)
	}
}
