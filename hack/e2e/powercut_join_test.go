//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// powercutJoin is how long after `cairnctl cluster add` began the cuts are spread: under TCG a worker
// answers in maintenance mode about 12 s after its QEMU started, add then gets a token and a ticket and
// sends the Join, and the worker is Running about 35 s after it took its lock (TestJoin). The span goes a
// little past that, so some cuts land on a node that had just become Running.
const powercutJoin = 75 * time.Second

// powercutCPJoin is the same span for a control plane's join: it waits for etcd to take it as a learner,
// catches up, is promoted and starts its API server, about two minutes after its lock under TCG with
// one vCPU.
const powercutCPJoin = 150 * time.Second

// powercutJoinFirst is the earliest cut: add needs a moment to start the VM, and a cut before there is a
// VM tests nothing.
const powercutJoinFirst = 3 * time.Second

// powerCutJoin runs one point of a join (`make e2e-powercut PHASE=join` for a worker, PHASE=cpjoin for a
// control plane): `cairnctl cluster add` boots one more node of the role for the running cluster c and
// pushes its join, and the node's plug is pulled at the point. Powered on, the node must reach Running:
// by itself when it had taken its lock (the Join resumes from the lock), through a new `cairnctl join`
// when it had not, as its operator would do it. No volume may be formatted twice, each volume is mounted
// once, and the Node is Ready in the cluster. A control plane must be one of exactly two etcd voters with
// no learner left over (a join cut after the join service added its learner leaves one, which its next
// join replaces); it is then removed from etcd, so the first control plane keeps its quorum alone. The
// node is stopped afterwards so the next point has the host's cores. It reports whether a volume was
// formatted a second time.
func powerCutJoin(t *testing.T, c *cluster, role string, at time.Duration) bool {
	before := len(listCluster(t, c.Name).Nodes)
	out, err := os.Create(filepath.Join(t.TempDir(), "add.log"))
	if err != nil {
		t.Fatal(err)
	}
	add := exec.Command(cairnctl, "cluster", "add", "--name", c.Name, "--state-dir", stateDir, "--image-dir", imageDir,
		"--role", role, "--boot-timeout", bootTimeout.String())
	add.Stdout, add.Stderr = out, out
	if err := add.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(at)
	// The node is in the cluster's list from the moment its QEMU started.
	var ci clusterInfo
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		if ci = listCluster(t, c.Name); len(ci.Nodes) > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster add started no VM within %v", at+time.Minute)
		}
	}
	i := len(ci.Nodes) - 1
	w := ci.Nodes[i]
	mustCtl(t, time.Minute, "cluster", "stop", "--name", c.Name, "--state-dir", stateDir, "--node", w.Name)
	_ = add.Process.Kill()
	_ = add.Wait()
	out.Close()
	progress, _ := os.ReadFile(out.Name())
	t.Logf("cut %s %.0fs after cluster add began; the end of its output:\n%s", w.Name, at.Seconds(), tailString(string(progress), 1500))

	volumes := []string{"state", "ephemeral"}
	if role == "controlplane" {
		volumes = append(volumes, "etcd")
	}
	cut := map[string]string{}
	for _, v := range volumes {
		cut[v] = filesystemUUID(t, filepath.Join(w.Dir, "disk-cairn-"+v+".raw"))
	}
	t.Logf("filesystems on %s's disks at the cut: %v", w.Name, cut)

	wc := &cluster{clusterInfo: ci, cairnconfig: c.cairnconfig}
	cp := ci.Nodes[0]
	joinAgain := func(maint []string) {
		mustCtl(t, restartTimeout+initTimeout, append(maint, "--cairnconfig", c.cairnconfig, "join", "--config", wc.nodeConfig(i),
			"--cluster", cp.APIEndpoint, "--join-port", strconv.Itoa(cp.Ports[50001]))...)
	}
	comeBackAs(t, wc, i, w.Name, joinAgain)
	mounted := mountedOnce(t, wc.mtls(i), volumes)
	formattedTwice := false
	for _, v := range volumes {
		if cut[v] != "" && mounted[v] != "" && mounted[v] != cut[v] {
			formattedTwice = true
			t.Errorf("volume %s was formatted again: filesystem %s at the cut, %s now", v, cut[v], mounted[v])
		}
	}
	waitNodeReady(t, filepath.Join(c.Dir, "kubeconfig"), w.Name)
	if role == "controlplane" {
		checkVoters(t, wc.mtls(0), cp.Name, w.Name)
		// While both run: a lone voter left with a stopped second one would have no quorum.
		mustCtl(t, time.Minute, append(wc.mtls(0), "etcd", "remove-member", w.Name)...)
		checkVoters(t, wc.mtls(0), cp.Name)
	}
	// Its point is made: a stopped node leaves the host's two cores to the control plane and the next
	// point (its Node stays in the list, NotReady).
	mustCtl(t, time.Minute, "cluster", "stop", "--name", c.Name, "--state-dir", stateDir, "--node", w.Name)
	return formattedTwice
}

// comeBackAs powers node i of the cluster on after a cut and brings it to Running: a node that had taken
// its lock resumes by itself and answers with mutual TLS only; one that had not is back in maintenance
// mode and is given its sequence again by again (Init or Join, as its operator would). It reports whether
// the node came back locked.
func comeBackAs(t *testing.T, c *cluster, i int, name string, again func(maint []string)) bool {
	t.Helper()
	mustCtl(t, 10*time.Minute, "cluster", "start", "--name", c.Name, "--state-dir", stateDir, "--image-dir", imageDir, "--node", name)
	locked := false
	for deadline := time.Now().Add(bootTimeout); ; time.Sleep(2 * time.Second) {
		if r := ctlQuiet(20*time.Second, append(c.mtls(i), "status", "-o", "json")...); r.err == nil {
			t.Logf("%s came back locked: it resumes by itself", name)
			locked = true
			break
		}
		maint := c.maint(t, i)
		var s statusResp
		if r := ctlQuiet(20*time.Second, append(maint, "status", "-o", "json")...); r.err == nil &&
			json.Unmarshal([]byte(r.stdout), &s) == nil && s.State == "Boot" && s.LockedBy == "" {
			t.Logf("%s came back unlocked, in maintenance mode: its sequence again", name)
			again(maint)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s answered neither with mutual TLS nor in maintenance mode within %v of its power-on", name, bootTimeout)
		}
	}
	s := waitStatus(t, func() []string { return c.mtls(i) }, restartTimeout+initTimeout, func(s statusResp) bool {
		return s.State == "Running" || s.LastError != "" && s.State != "Init" && s.State != "Join" && s.State != "Boot"
	})
	if s.State != "Running" {
		t.Fatalf("after the power cut %s is %s: %s", name, s.State, s.LastError)
	}
	return locked
}
