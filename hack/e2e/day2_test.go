//go:build e2e

package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The operator's day-2 checks on a running control plane, made by TestControlPlane. Each leaves the
// node as it found it.

// checkLogs: logs of Kubernetes components are their own lines, machined's log and dmesg answer.
func checkLogs(t *testing.T, mtls []string) {
	// klog's header (after the time cairnctl puts in front): the lines are the component's own, not
	// Cairn's about it.
	klog := regexp.MustCompile(`(?m)^\S+ \S+ [IWE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.-]+\.go:\d+\]`)
	for _, svc := range []string{"kubelet", "kube-apiserver"} {
		out := mustCtl(t, time.Minute, append(mtls, "logs", svc, "--tail", "50")...)
		if !klog.MatchString(out) {
			t.Errorf("cairnctl logs %s --tail 50 shows no line of %s's own:\n%s", svc, svc, out)
		}
	}
	if out := mustCtl(t, time.Minute, append(mtls, "logs", "machined", "--tail", "20")...); strings.TrimSpace(out) == "" {
		t.Errorf("cairnctl logs machined is empty")
	}
	if out := mustCtl(t, time.Minute, append(mtls, "dmesg")...); !strings.Contains(out, "Linux version") {
		t.Errorf("cairnctl dmesg lacks the kernel's first line (Linux version):\n%s", tailString(out, 2000))
	}
}

// checkServiceRestart stops and starts kubelet through the API: the events record both, and the restarted
// kubelet takes the node back.
func checkServiceRestart(t *testing.T, mtls []string, kc, nodeName string) {
	mustCtl(t, 2*time.Minute, append(mtls, "service", "kubelet", "stop")...)
	if st := serviceState(t, mtls, "kubelet"); st != "stopped" {
		t.Errorf("kubelet after service stop: state %q, want stopped", st)
	}
	mustCtl(t, 2*time.Minute, append(mtls, "service", "kubelet", "start")...)
	waitService(t, mtls, "kubelet", "running", 2*time.Minute)
	var seen []string
	for _, e := range readEvents(t, mtls) {
		if e.Kind == "service" && e.Task == "kubelet" {
			seen = append(seen, e.Outcome)
		}
	}
	if !containsInOrder(seen, "stopped", "started") {
		t.Errorf("kubelet's service events = %v, want a stop then a start", seen)
	}
	waitNodeReady(t, kc, nodeName)
}

// checkEtcdSnapshot: etcd members lists the node's member, at URLs by the node's name (which every
// control plane resolves through its /etc/hosts), as the leader; the node refuses to remove its own
// member, and a snapshot is written to path.
func checkEtcdSnapshot(t *testing.T, mtls []string, node, path string) {
	out := mustCtl(t, time.Minute, append(mtls, "etcd", "members")...)
	if url := "https://" + node + ":2380"; !strings.Contains(out, url) || !strings.Contains(out, "1 voting member(s): a quorum is 1; leader: "+node) {
		t.Errorf("etcd members does not list %s at %s as the one voting member and leader:\n%s", node, url, out)
	}
	var members struct {
		Members []struct {
			Name     string `json:"name"`
			IsLeader bool   `json:"is_leader"`
		} `json:"members"`
	}
	ctlJSON(t, &members, append(mtls, "etcd", "members")...)
	if len(members.Members) != 1 || !members.Members[0].IsLeader {
		t.Fatalf("etcd members = %+v, want one member, leading", members.Members)
	}
	r := ctl(t, time.Minute, append(mtls, "etcd", "remove-member", members.Members[0].Name)...)
	if r.err == nil || !strings.Contains(r.stderr, "reset the node instead") {
		t.Errorf("etcd remove-member of the node's own member: want it refused with what to do instead:\n%s", r)
	}
	out = mustCtl(t, 5*time.Minute, append(mtls, "etcd", "snapshot", path)...)
	fi, err := os.Stat(path)
	if err != nil || fi.Size() < 1<<16 {
		t.Fatalf("etcd snapshot wrote %v (%v), want a file of at least 64 KiB; cairnctl said:\n%s", fi, err, out)
	}
	t.Logf("snapshot: %d bytes\n%s", fi.Size(), out)
}

// checkDestroy runs cluster destroy and checks that no QEMU, no directory and no list entry is left.
// The consoles go with the cluster's directory: when the test has failed, their ends go to its log first.
func checkDestroy(t *testing.T, c *cluster) {
	if t.Failed() {
		for _, n := range c.Nodes {
			logConsole(t, n.Name, n.Console, 6000)
		}
	}
	mustCtl(t, 2*time.Minute, "cluster", "destroy", "--name", c.Name, "--state-dir", stateDir)
	for _, n := range c.Nodes {
		if alive(n.PID) {
			t.Errorf("node %s: QEMU (pid %d) still runs after cluster destroy", n.Name, n.PID)
		}
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster destroy left %s (%v)", c.Dir, err)
	}
	if ci := listCluster(t, c.Name); len(ci.Nodes) > 0 || ci.Dir != "" {
		t.Errorf("cluster list still shows %s after destroy: %+v", c.Name, ci)
	}
}
