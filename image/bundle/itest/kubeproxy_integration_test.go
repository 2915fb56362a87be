//go:build integration

package itest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

// runProxyCleanup runs kube-proxy's clean-up (`kube-proxy --cleanup`, which
// removes every mode's rules and exits) inside the kube-proxy image, in a
// network namespace of the test's own: without the DaemonSet's variable it is
// upstream's kube-proxy; with it (kube/proxyenv), on empty tables kube-proxy
// runs no iptables at all, and when an iptables-mode chain is there it runs
// them and the chain goes.
func runProxyCleanup(t *testing.T, c *containerd, v versions.Versions) {
	img := "registry.k8s.io/kube-proxy:" + v.Kubernetes
	netns := fmt.Sprintf("cairn-itest-proxy-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", netns).Run() })
	inNetns := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"netns", "exec", netns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cleanup := func(id string, env ...string) string {
		t.Helper()
		args := []string{"run", "--rm", "--privileged", "--with-ns", "network:/run/netns/" + netns}
		for _, e := range env {
			args = append(args, "--env", e)
		}
		args = append(args, img, id, "/usr/local/bin/kube-proxy", "--cleanup", "-v=4")
		stdout, stderr, err := c.ctrFull("k8s.io", args...)
		if err != nil {
			t.Fatalf("kube-proxy --cleanup: %v", err)
		}
		return stdout + stderr
	}
	const nftablesMode = "CAIRN_KUBE_PROXY_MODE=nftables" // what Cairn's DaemonSet sets in nftables mode
	const note = "kube-proxy's environment: "             // proxyenv.Note, the line it prints

	// Not asked to (a DaemonSet of one's own): kube-proxy as upstream's.
	got := cleanup("proxy-launch-plain")
	if strings.Contains(got, note) || !strings.Contains(got, "iptables-save") {
		t.Errorf("without %s: %q; want kube-proxy's own clean-up, iptables and all, and no word about its environment", nftablesMode, got)
	}
	got = cleanup("proxy-launch-empty", nftablesMode)
	if !strings.Contains(got, note+"no iptables-mode chains on the node") || strings.Contains(got, "iptables-save") {
		t.Errorf("on empty tables: %q; want the note on kube-proxy's environment and no iptables run", got)
	}

	// What kube-proxy's iptables mode leaves: a chain and the jump to it.
	inNetns("iptables", "-t", "nat", "-N", "KUBE-SERVICES")
	inNetns("iptables", "-t", "nat", "-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
	got = cleanup("proxy-launch-leftovers", nftablesMode)
	if !strings.Contains(got, note+"iptables-mode chains on the node (ip nat KUBE-SERVICES)") || !strings.Contains(got, "iptables-save") {
		t.Errorf("with an iptables-mode chain: %q; want the note to name it and kube-proxy to run iptables", got)
	}
	if rules := inNetns("iptables", "-t", "nat", "-S"); strings.Contains(rules, "KUBE-SERVICES") {
		t.Errorf("after kube-proxy's clean-up the nat table still has KUBE-SERVICES:\n%s", rules)
	}
}
