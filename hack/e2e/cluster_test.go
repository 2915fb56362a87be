//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/hack/examples/helloimage"
)

// createTimeout bounds a cluster create that inits (and joins) nodes with Kubernetes under TCG.
const createTimeout = 30 * time.Minute

// TestControlPlane follows one control plane made by `cairnctl cluster create` through its life, the way
// an operator drives it (issues 4, 5 and 7): Kubernetes up with a pod answering; logs, dmesg and service
// control; a reboot that keeps the etcd volume, its data and the node's identity without running Init
// again; an etcd snapshot; a reset that wipes Cairn's disks and leaves a foreign disk on the same VM
// alone; a new Init from the snapshot that brings the cluster's state back; a power-on 300 days later
// that renews the certificates (issue 14); then cluster destroy, which
// must leave no QEMU and no directory behind. Each step starts from the state the previous one left, so
// one VM serves them all (TCG makes every boot and Init cost minutes).
// Before the reboot, the node serves workloads as a user's first app (issue 12: checkWorkloads on
// one node).
func TestControlPlane(t *testing.T) {
	foreign := filepath.Join(t.TempDir(), "foreign.raw")
	makeForeignExt4(t, foreign)
	foreignSum := headTailSum(t, foreign)

	c := createCluster(t, "e2e", createTimeout, "--disk-file", "foreign="+foreign)
	n := c.Nodes[0]
	mtls := func() []string { return c.mtls(0) }
	s := status(t, mtls())
	if s.State != "Running" || s.APIMode != "mtls" || s.LockedBy != "init" {
		t.Fatalf("status after cluster create = %+v, want Running over mtls, locked by init", s)
	}
	// The cairnconfig written by create works without --nodes: its context lists every node.
	if out := mustCtl(t, time.Minute, "--cairnconfig", c.cairnconfig, "status"); !strings.Contains(out, "Running") {
		t.Errorf("status through the cairnconfig alone:\n%s", out)
	}
	kc := filepath.Join(c.Dir, "kubeconfig")
	if !fileExists(kc) {
		t.Fatalf("cluster create wrote no kubeconfig %s", kc)
	}
	uuid := etcdUUID(t, mtls())

	t.Run("Kubernetes", func(t *testing.T) {
		out := mustCtl(t, 10*time.Minute, append(mtls(), "health")...)
		t.Logf("cairnctl health:\n%s", out)
		waitNodeReady(t, kc, n.Name)
		waitCoreDNSOn(t, kc, n.Name) // a cluster of one node: one replica
		importHello(t, c)
		kubectl(t, kc, "run", "web", "--image="+helloimage.Ref, "--image-pull-policy=Never", "--restart=Never", "--port=8080",
			`--overrides={"spec":{"tolerations":[{"operator":"Exists"}]}}`)
		kubectl(t, kc, "wait", "--for=condition=Ready", "pod/web", "--timeout=5m")
		// Through the API server's proxy to the pod: the answer crossed the node's pod network.
		waitKubectl(t, kc, 2*time.Minute, func(out string) bool { return strings.Contains(out, "hello from web") },
			"get", "--raw", "/api/v1/namespaces/default/pods/web:8080/proxy/")
		kubectl(t, kc, "create", "configmap", "keep-me", "--from-literal=answer=42")
		// The kubelet's serving certificate comes from the cluster: its CSR approved by the control plane's
		// machined, signed by the controller manager; logs are served over it.
		waitKubectl(t, kc, 3*time.Minute, func(out string) bool {
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "system:node:"+n.Name) && strings.HasSuffix(strings.TrimSpace(l), "Approved,Issued") {
					return true
				}
			}
			return false
		}, "get", "csr", "--field-selector=spec.signerName=kubernetes.io/kubelet-serving")
		waitKubectl(t, kc, 2*time.Minute, func(string) bool { return true }, "logs", "web")
	})

	var certsBefore map[string]time.Time
	t.Run("certificates", func(t *testing.T) { certsBefore = checkCerts(t, mtls()) })
	t.Run("join tokens", func(t *testing.T) { checkJoinTokens(t, mtls()) })
	t.Run("config", func(t *testing.T) { checkConfig(t, mtls(), c.nodeConfig(0)) })
	t.Run("workloads", func(t *testing.T) { checkWorkloads(t, c, kc) })
	t.Run("logs and dmesg", func(t *testing.T) { checkLogs(t, mtls()) })
	t.Run("service stop and start", func(t *testing.T) {
		checkServiceRestart(t, mtls(), kc, n.Name)
		kubectl(t, kc, "wait", "--for=condition=Ready", "pod/web", "--timeout=5m")
	})
	t.Run("apply", func(t *testing.T) { checkApply(t, c, kc, n.Name) })

	t.Run("reboot keeps everything", func(t *testing.T) {
		before := status(t, mtls())
		off := consoleSize(t, n)
		mustCtl(t, time.Minute, append(mtls(), "reboot")...)
		waitConsole(t, n, off, regexp.MustCompile(`machine API listening`), bootTimeout)
		after := waitStatus(t, mtls, restartTimeout, func(st statusResp) bool {
			return st.BootTime.After(before.BootTime) && st.State == "Running"
		})
		if after.LockedBy != "init" {
			t.Errorf("status after reboot = %+v, want Running, locked by init", after)
		}
		waitEtcdMounted(t, mtls(), time.Minute)
		if got := etcdUUID(t, mtls()); got != uuid {
			t.Errorf("etcd volume UUID after reboot = %s, before %s: the volume was formatted again", got, uuid)
		}
		checkNoSequenceAfterReboot(t, mtls(), "init", "state", "ephemeral", "etcd")
		mustCtl(t, 10*time.Minute, append(mtls(), "health")...)
		waitNodeReady(t, kc, n.Name)
		waitConfigMap(t, kc, "keep-me", "42")
		// A year's certificates are not re-issued by a reboot a few minutes into their life.
		for name, from := range checkCerts(t, mtls()) {
			if was, ok := certsBefore[name]; ok && !was.Equal(from) {
				t.Errorf("%s was re-issued by the reboot (valid from %s, before %s)", name, from, was)
			}
		}
	})

	snapshot := filepath.Join(t.TempDir(), "etcd.snapshot")
	t.Run("etcd members and snapshot", func(t *testing.T) { checkEtcdSnapshot(t, mtls(), n.Name, snapshot) })

	t.Run("reset wipes Cairn's disks only", func(t *testing.T) {
		off := consoleSize(t, n)
		out := mustCtl(t, 10*time.Minute, append(mtls(), "reset", "--wipe", "all")...)
		t.Logf("reset:\n%s", out)
		defer func() {
			// A reset whose sequence failed leaves the node in Reset, answering with its own certificate:
			// its status and events say which task failed.
			if t.Failed() {
				t.Logf("status:\n%s", ctlQuiet(20*time.Second, append(mtls(), "status")...))
				t.Logf("events:\n%s", ctlQuiet(20*time.Second, append(mtls(), "events")...))
			}
		}()
		waitConsole(t, n, off, regexp.MustCompile(`fingerprint[:=] *[0-9a-f]{64}`), 2*bootTimeout)
		maint := func() []string { return c.maint(t, 0) }
		st := waitStatus(t, maint, bootTimeout, func(s statusResp) bool { return s.State == "Boot" })
		if st.LockedBy != "" || st.APIMode != "maintenance" {
			t.Errorf("status after reset = %+v, want Boot in maintenance mode, unlocked", st)
		}
		var p planResp
		ctlJSON(t, &p, append(maint(), "plan", "--config", c.nodeConfig(0))...)
		for _, step := range p.Steps {
			if step.Action != "format" {
				t.Errorf("after reset, plan for %s on %s = %s (%s), want format: the disk was not wiped", step.Volume, step.Disk, step.Action, step.Reason)
			}
		}
		if got := headTailSum(t, foreign); got != foreignSum {
			t.Errorf("the foreign disk's first and last MiB changed across the reset")
		}
	})

	t.Run("init from the snapshot", func(t *testing.T) {
		if !fileExists(snapshot) {
			t.Skip("no snapshot was taken")
		}
		// This Init's config also carries a machine.network (issue 14): a second static address and a
		// route on the cluster NIC, the resolver, and a NIC the VM lacks, which must not stop Init.
		// And a time server on the host, ahead of the node's clock, which the node must step to.
		timeServer := serveTime(t)
		cfg := withNetworkConfig(t, c.nodeConfig(0), n.Address, timeServer)
		out := mustCtl(t, initTimeout, append(c.maint(t, 0), "init", "--config", cfg, "--etcd-snapshot", snapshot)...)
		t.Logf("init --etcd-snapshot:\n%s", out)
		waitStatus(t, mtls, time.Minute, func(s statusResp) bool { return s.State == "Running" })
		t.Run("network from the config", func(t *testing.T) { checkNetworkConfig(t, mtls(), n.Address) })
		t.Run("clock from the config's time server", func(t *testing.T) { checkClock(t, mtls(), timeServer) })
		mustCtl(t, 10*time.Minute, append(mtls(), "health")...)
		waitConfigMap(t, kc, "keep-me", "42")
		waitNodeReady(t, kc, n.Name)
	})
	// Last: from here the node's certificates are valid only at its clock, 300 days ahead of the host's.
	t.Run("300 days on, the certificates are renewed", func(t *testing.T) { checkClockMove(t, c) })

	checkDestroy(t, c)
	if got := headTailSum(t, foreign); got != foreignSum {
		t.Errorf("the foreign disk changed")
	}
}

// TestJoin is a control plane and a worker made by `cluster create --workers 1` (issues 6 and 12): the
// worker joins through `cairnctl join`'s code, both nodes are Running and Ready, a pod placed on the
// worker runs, and the worker comes back Running after a reboot without joining again. Both nodes then
// serve workloads across the pod network (checkWorkloads on two nodes), and cluster destroy leaves
// nothing. The operator's day-2 checks on the control plane are TestControlPlane's, not repeated here.
//
// The cluster's endpoint is a virtual IP (--vip, issue 14): the control plane holds it (an event says
// so), and the worker joins, bootstraps its kubelet and serves through it, which only works when the
// address is on the control plane's L2 link and answered there.
//
// `make e2e-join` (CAIRN_E2E_JOIN=1) adds a third VM: `cluster add --self-join` boots a worker that
// joins by itself from its kernel command line. With three TCG VMs on a 2-core host it passed one of
// two runs: once the third VM booted, the control plane's API server stalled past its clients' 5 s
// timeouts and the controller-manager lost its lease, so the new node's certificate was never signed.
// That third VM stays out of `make test`.
func TestJoin(t *testing.T) {
	const vip = "10.5.0.250"
	c := createCluster(t, "join", createTimeout, "--workers", "1", "--vip", vip)
	for i := range c.Nodes {
		if s := status(t, c.mtls(i)); s.State != "Running" {
			t.Errorf("node %s: status %+v, want Running", c.Nodes[i].Name, s)
		}
	}
	held := false
	for _, e := range readEvents(t, c.mtls(0)) {
		held = held || e.Kind == "vip" && e.Outcome == "acquired" && strings.Contains(e.Message, vip)
	}
	if !held {
		t.Errorf("the control plane has no event saying it holds the virtual IP %s", vip)
	}
	w := c.Nodes[1]
	before := status(t, c.mtls(1))
	off := consoleSize(t, w)
	mustCtl(t, time.Minute, append(c.mtls(1), "reboot")...)
	waitConsole(t, w, off, regexp.MustCompile(`machine API listening`), bootTimeout)
	after := waitStatus(t, func() []string { return c.mtls(1) }, restartTimeout, func(s statusResp) bool {
		return s.State == "Running" && s.BootTime.After(before.BootTime)
	})
	if after.LockedBy != "join" {
		t.Errorf("worker after reboot = %+v, want Running, locked by join", after)
	}
	checkNoSequenceAfterReboot(t, c.mtls(1), "join", "state", "ephemeral")

	kc := c.Dir + "/kubeconfig"
	if !fileExists(kc) {
		t.Fatalf("cluster create wrote no kubeconfig %s", kc)
	}
	// The subtests log the cluster's state when they fail; a failure before them (CI's last: the worker
	// back from its reboot, then an unnamed failure) logs it here.
	subtests := false
	defer func() {
		if t.Failed() && !subtests {
			logClusterState(t, kc, c.mtls(0))
		}
	}()
	waitNodeReady(t, kc, c.Nodes[0].Name)
	waitNodeReady(t, kc, w.Name)
	waitCoreDNSOn(t, kc, c.Nodes[0].Name, w.Name) // a second replica once the worker is Ready, on it
	importHello(t, c)
	kubectl(t, kc, "run", "web-w", "--image="+helloimage.Ref, "--image-pull-policy=Never", "--restart=Never", "--port=8080",
		`--overrides={"spec":{"nodeName":"`+w.Name+`"}}`)
	kubectl(t, kc, "wait", "--for=condition=Ready", "pod/web-w", "--timeout=5m")
	subtests = true
	t.Run("workloads", func(t *testing.T) {
		defer func() {
			if t.Failed() {
				logClusterState(t, kc, c.mtls(0))
			}
		}()
		mustCtl(t, 10*time.Minute, "--cairnconfig", c.cairnconfig, "--nodes", c.Nodes[0].APIEndpoint+","+w.APIEndpoint, "health")
		checkWorkloads(t, c, kc)
	})
	if os.Getenv("CAIRN_E2E_JOIN") == "" {
		t.Run("a worker that resets leaves the node list", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					logLeftNode(t, kc, w.Name, c.mtls(0))
				}
			}()
			out := mustCtl(t, 10*time.Minute, append(c.mtls(1), "reset", "--no-reboot")...)
			t.Logf("reset of %s:\n%s", w.Name, out)
			// The worker drains (its pods get up to 2 min to stop, workload.drainTimeout), marks its Node as
			// left, and the control plane deletes the Node 30 s later (leftNodeGrace) at its next pass (every
			// 30 s): up to about 3.5 min by design, more than the 3 min this waited when a slow drain failed it.
			waitKubectl(t, kc, 5*time.Minute, func(out string) bool { return !strings.Contains(out, w.Name) },
				"get", "nodes", "-o", "name")
			waitCoreDNSOn(t, kc, c.Nodes[0].Name) // one node left: one replica again
		})
		// Last: the add-on's network takes the control plane's new pods.
		t.Run("a network add-on's CNI plugin in /opt/cni/bin", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					logClusterState(t, kc, c.mtls(0))
				}
			}()
			checkAddonCNI(t, c, 0, kc)
		})
		t.Log("skipping the self-joined third VM: run `make e2e-join` (CAIRN_E2E_JOIN=1)")
		checkDestroy(t, c)
		return
	}

	// The other way in: a node booted with cairn.join=, cairn.jointoken= and cairn.joinca= on its kernel
	// command line asks the join service for its ticket by itself; nobody sends it a Join.
	out := mustCtl(t, createTimeout, "cluster", "add", "--name", c.Name, "--state-dir", stateDir, "--image-dir", imageDir,
		"--self-join", "--boot-timeout", bootTimeout.String())
	t.Logf("cluster add --self-join:\n%s", out)
	c = &cluster{clusterInfo: listCluster(t, c.Name), cairnconfig: c.cairnconfig}
	if len(c.Nodes) != 3 {
		t.Fatalf("cluster has %d nodes after cluster add, want 3", len(c.Nodes))
	}
	w2 := c.Nodes[2]
	if s := status(t, c.mtls(2)); s.State != "Running" || s.LockedBy != "join" {
		t.Errorf("self-joined node %s: status %+v, want Running, locked by join", w2.Name, s)
	}
	// A pushed join's ticket request comes from cairnctl on the host (QEMU's NAT); this one must come
	// from the node itself, over the cluster's L2.
	var issued []string
	for _, e := range readEvents(t, c.mtls(0)) {
		if e.Kind == "join" && e.Outcome == "ticket" {
			issued = append(issued, e.Message)
		}
	}
	if !slices.ContainsFunc(issued, func(m string) bool { return strings.Contains(m, w2.Name) && strings.Contains(m, "from 10.5.0.") }) {
		t.Errorf("the control plane issued no ticket to %s asked for from the cluster's L2; tickets: %q", w2.Name, issued)
	}
	waitNodeReady(t, kc, w2.Name)
	checkDestroy(t, c)
}

// waitNodeReady waits for the Kubernetes node to be Ready.
func waitNodeReady(t *testing.T, kubeconfig, name string) {
	t.Helper()
	waitKubectl(t, kubeconfig, 5*time.Minute, func(out string) bool { return strings.TrimSpace(out) == "True" },
		"get", "node", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
}

// waitConfigMap waits for the ConfigMap's answer key to hold want.
func waitConfigMap(t *testing.T, kubeconfig, name, want string) {
	t.Helper()
	waitKubectl(t, kubeconfig, 5*time.Minute, func(out string) bool { return strings.TrimSpace(out) == want },
		"get", "configmap", name, "-o", "jsonpath={.data.answer}")
}

// kubectl runs kubectl against the cluster and fails the test if it fails. A failure to reach the API
// server (a TLS handshake or a connection that timed out, a 503 while it syncs) is tried again for up
// to two minutes, as a user would: the first kubectl after a node rejoins met one, in CI, and failed
// the test on an API server that answered the next call. A retried create whose first try did land
// answers AlreadyExists: that counts as done.
func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	for deadline, try := time.Now().Add(2*time.Minute), 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		out, err := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		cancel()
		t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		switch {
		case err == nil:
			return string(out)
		case try > 1 && strings.Contains(string(out), "AlreadyExists"):
			return string(out)
		case unreachable(string(out)) && time.Now().Before(deadline):
			t.Logf("kubectl %s: the API server did not answer (try %d); trying again", strings.Join(args, " "), try)
			time.Sleep(5 * time.Second)
		default:
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
	}
}

// unreachable tells kubectl's failures to reach or hear from the API server from its refusals.
func unreachable(out string) bool {
	for _, s := range []string{"TLS handshake timeout", "connection refused", "connection reset by peer", "i/o timeout",
		"Client.Timeout exceeded", "unexpected EOF", "http2: client connection lost", "currently unable to handle the request",
		"Timeout: request did not complete", "unable to return a response in the time allotted", "etcdserver: request timed out"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// logLeftNode logs what says why a reset worker's Node is still listed: whether it was marked as left
// and when, its kubelet's last heartbeat, and what the control plane's machined said about it.
func logLeftNode(t *testing.T, kc, node string, controlPlane []string) {
	out, err := exec.Command(kubectlBin, "--kubeconfig", kc, "--request-timeout=30s", "get", "node", node, "-o",
		`jsonpath={.metadata.annotations}{"\n"}{.status.conditions[?(@.type=="Ready")]}`).CombinedOutput()
	t.Logf("Node %s (err=%v): %s", node, err, out)
	logs := ctl(t, time.Minute, append(controlPlane, "logs", "machined")...)
	var lines []string
	for _, l := range strings.Split(logs.stdout, "\n") {
		if strings.Contains(l, node) {
			lines = append(lines, l)
		}
	}
	t.Logf("the control plane's machined on %s:\n%s", node, strings.Join(lines, "\n"))
}

// waitKubectl runs kubectl until ok accepts its output.
func waitKubectl(t *testing.T, kubeconfig string, timeout time.Duration, ok func(string) bool, args ...string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(3 * time.Second) {
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--request-timeout=20s"}, args...)...).CombinedOutput()
		last = fmt.Sprintf("%v\n%s", err, out)
		if err == nil && ok(string(out)) {
			t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
			return
		}
	}
	t.Fatalf("kubectl %s never gave the expected answer within %v; last: %s", strings.Join(args, " "), timeout, last)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
