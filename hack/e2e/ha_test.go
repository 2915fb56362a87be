//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-os/cairn/hack/examples/helloimage"
)

// haTimeout bounds a create of three control planes and a worker: one Init and three joins, one after
// the other, with four emulated machines sharing the host's cores.
const haTimeout = 75 * time.Minute

// haVIP is the HA cluster's API endpoint, an address of the cluster's L2 that no node has.
const haVIP = "10.5.0.250"

// TestHA is issue 14's scenario (`make e2e-ha`): three control planes and a worker made by `cluster
// create --controlplanes 3 --workers 1 --vip`, the worker's kubelet reaching the API only through the
// virtual IP (its discovery name resolves to nothing else). Every node is Running and Ready, etcd has
// three voting members, and a Deployment runs on the worker. Then:
//
//   - the control plane that holds the virtual IP is powered off (its QEMU killed, no shutdown): another
//     takes the address over (its event says so; the test prints how long it took), the worker's kubelet
//     renews its Node lease through it and stays Ready, the Deployment stays available, and the API of
//     the others reads what was written before and takes writes;
//   - the powered-off node is started again and comes back Running by itself, its etcd member a voter
//     again;
//   - one control plane is reset: it leaves etcd first, so the two left keep quorum and the API writes.
//
// `make e2e` skips it (it needs about 25 minutes on a fast 2-core host; on the slower hosts of earlier
// sessions the third API server did not come up beside two others under TCG).
func TestHA(t *testing.T) {
	if os.Getenv("CAIRN_E2E_HA") == "" {
		t.Skip("three control planes and a worker under TCG take most of half an hour: run `make e2e-ha` (CAIRN_E2E_HA=1)")
	}
	c := createCluster(t, "ha", haTimeout, "--controlplanes", "3", "--workers", "1", "--vip", haVIP)
	if len(c.Nodes) != 4 {
		t.Fatalf("cluster has %d nodes, want 4", len(c.Nodes))
	}
	cps, worker := []int{0, 1, 2}, c.Nodes[3]
	if !strings.HasSuffix(worker.Name, "-w1") {
		t.Fatalf("the fourth node is %s, want the worker ha-w1 (cluster list: control planes first)", worker.Name)
	}
	for i, want := range []string{"init", "join", "join", "join"} {
		if s := status(t, c.mtls(i)); s.State != "Running" || s.LockedBy != want {
			t.Errorf("node %s: status %+v, want Running, locked by %s", c.Nodes[i].Name, s, want)
		}
	}
	checkVoters(t, c.mtls(2), c.Nodes[0].Name, c.Nodes[1].Name, c.Nodes[2].Name)

	kc := filepath.Join(c.Dir, "kubeconfig")
	defer func() {
		if t.Failed() {
			logClusterState(t, kc, c.mtls(1))
		}
	}()
	for _, n := range c.Nodes {
		waitNodeReady(t, kc, n.Name)
	}
	if got := strings.Count(kubectl(t, kc, "get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "name"), "node/"); got != 3 {
		t.Errorf("%d nodes labelled control-plane, want 3", got)
	}
	kubectl(t, kc, "create", "configmap", "before", "--from-literal=answer=1")
	// Made with no replica, pinned to the worker, then scaled: no pod lands elsewhere first and needs a
	// rollout to move (the last run's rollout outlasted its 5 minutes on a busy controller-manager).
	importHello(t, c, 3) // the worker's, where the Deployment runs
	kubectl(t, kc, "create", "deployment", "hello", "--image="+helloimage.Ref, "--replicas=0", "--port=8080")
	kubectl(t, kc, "patch", "deployment", "hello", "--type=merge",
		"-p", `{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/hostname":"`+worker.Name+`"}}}}}`)
	kubectl(t, kc, "scale", "deployment", "hello", "--replicas=2")
	rolloutStatus(t, kc, "default", "deployment/hello", 5*time.Minute)

	holder := vipHolder(t, c, cps, time.Time{})
	if holder < 0 {
		t.Fatalf("no control plane has an event saying it holds the virtual IP %s", haVIP)
	}
	rest := slices.DeleteFunc(slices.Clone(cps), func(i int) bool { return i == holder })
	// The admin kubeconfig names the first control plane's forwarded port; the test reaches the API of
	// a control plane that stays up through its own.
	kcUp := kubeconfigFor(t, c, kc, rest[0])

	gone := listCluster(t, c.Name).Nodes[holder]
	if !gone.Running || gone.PID == 0 {
		t.Fatalf("the VIP holder's QEMU does not run: %+v", gone)
	}
	killed := time.Now()
	if err := syscall.Kill(gone.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("power off %s (kill QEMU %d): %v", gone.Name, gone.PID, err)
	}
	waitExit(t, gone.PID, time.Minute)
	t.Logf("powered off %s, which held the virtual IP", gone.Name)

	// Another control plane takes the address over once the holder's etcd lease has expired.
	next := -1
	for deadline := time.Now().Add(3 * time.Minute); next < 0; time.Sleep(2 * time.Second) {
		if next = vipHolder(t, c, rest, killed); next < 0 && time.Now().After(deadline) {
			t.Fatalf("no other control plane took the virtual IP %s over within 3 minutes of %s's power-off", haVIP, gone.Name)
		}
	}
	t.Logf("%s took the virtual IP over %.1fs after %s was powered off", c.Nodes[next].Name,
		vipAcquiredAt(t, c, next, killed).Sub(killed).Seconds(), gone.Name)

	// Two of three members keep etcd's quorum: the API reads what was written before and takes writes.
	waitConfigMap(t, kcUp, "before", "1")
	waitKubectl(t, kcUp, 5*time.Minute, func(string) bool { return true }, "create", "configmap", "after", "--from-literal=answer=2")
	waitConfigMap(t, kcUp, "after", "2")

	// The worker's kubelet knows the API only as the virtual IP: a lease renewed after the takeover is one
	// it renewed through the new holder.
	lease := func() string {
		return strings.TrimSpace(kubectl(t, kcUp, "get", "lease", "-n", "kube-node-lease", worker.Name, "-o", "jsonpath={.spec.renewTime}"))
	}
	first := lease()
	waitKubectl(t, kcUp, 2*time.Minute, func(out string) bool { return strings.TrimSpace(out) != first },
		"get", "lease", "-n", "kube-node-lease", worker.Name, "-o", "jsonpath={.spec.renewTime}")
	// Past the node monitor's grace period (40 s) since the power-off, the worker is still Ready.
	time.Sleep(time.Until(killed.Add(50 * time.Second)))
	if out := kubectl(t, kcUp, "get", "node", worker.Name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`); strings.TrimSpace(out) != "True" {
		t.Errorf("worker %s is not Ready after the VIP moved: %q", worker.Name, out)
	}
	if out := kubectl(t, kcUp, "get", "deployment", "hello", "-o", "jsonpath={.status.availableReplicas}"); strings.TrimSpace(out) != "2" {
		t.Errorf("deployment hello has %q available replicas after the VIP moved, want 2", out)
	}

	// The powered-off control plane starts again, resumes by itself and is a voter again.
	mustCtl(t, 10*time.Minute, "cluster", "start", "--name", c.Name, "--state-dir", stateDir, "--image-dir", imageDir, "--node", gone.Name)
	s := waitStatus(t, func() []string { return c.mtls(holder) }, restartTimeout+initTimeout, func(s statusResp) bool {
		return s.State == "Running" || s.LastError != "" && s.State != "Boot"
	})
	if s.State != "Running" || s.LockedBy != map[bool]string{true: "init", false: "join"}[holder == 0] {
		t.Fatalf("%s after its power-off: %+v, want Running with its own lock", gone.Name, s)
	}
	waitNodeReady(t, kcUp, gone.Name)
	checkVoters(t, c.mtls(next), c.Nodes[0].Name, c.Nodes[1].Name, c.Nodes[2].Name)

	// A reset control plane leaves etcd before it wipes itself: two members keep quorum.
	out := mustCtl(t, 10*time.Minute, append(c.mtls(holder), "reset", "--no-reboot")...)
	t.Logf("reset of %s:\n%s", gone.Name, out)
	var left []string
	for _, i := range cps {
		if i != holder {
			left = append(left, c.Nodes[i].Name)
		}
	}
	checkVoters(t, c.mtls(next), left...)
	waitKubectl(t, kcUp, 5*time.Minute, func(string) bool { return true }, "create", "configmap", "after-reset", "--from-literal=answer=3")
	waitConfigMap(t, kcUp, "after-reset", "3")
	if out := mustCtl(t, 2*time.Minute, append(c.mtls(next), "health")...); !strings.Contains(out, "etcd") {
		t.Errorf("health on %s after %s's reset:\n%s", c.Nodes[next].Name, gone.Name, out)
	}
}

// checkVoters fails the test unless etcd's members, asked through flags, are exactly want, all voting.
func checkVoters(t *testing.T, flags []string, want ...string) {
	t.Helper()
	var members struct {
		Members []struct {
			Name      string `json:"name"`
			IsLearner bool   `json:"is_learner"`
		} `json:"members"`
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(5 * time.Second) {
		ctlJSON(t, &members, append(flags, "etcd", "members")...)
		var voters []string
		for _, m := range members.Members {
			if !m.IsLearner {
				voters = append(voters, m.Name)
			}
		}
		slices.Sort(voters)
		sorted := slices.Sorted(slices.Values(want))
		if slices.Equal(voters, sorted) && len(members.Members) == len(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd members = %+v, want the voters %v and no others", members.Members, sorted)
		}
	}
}

// vipHolder is the node among candidates whose latest virtual-IP event after since says it holds the
// address, or -1.
func vipHolder(t *testing.T, c *cluster, candidates []int, since time.Time) int {
	t.Helper()
	// The latest acquisition names the holder: the nodes' events are read one after the other, and when
	// the address moved in between, the one that gave it up still says it holds it.
	holder, latest := -1, time.Time{}
	for _, i := range candidates {
		if at := vipAcquiredAt(t, c, i, since); at.After(latest) {
			holder, latest = i, at
		}
	}
	return holder
}

// vipAcquiredAt is when node i last acquired the virtual IP after since, if it still holds it.
func vipAcquiredAt(t *testing.T, c *cluster, i int, since time.Time) time.Time {
	t.Helper()
	r := ctlQuiet(30*time.Second, append(c.mtls(i), "events", "-o", "json")...)
	if r.err != nil {
		return time.Time{}
	}
	var at time.Time
	for _, e := range parseEvents(t, r.stdout) {
		if e.Kind != "vip" || !e.Time.After(since) {
			continue
		}
		if e.Outcome == "acquired" && strings.Contains(e.Message, haVIP) {
			at = e.Time
		} else {
			at = time.Time{}
		}
	}
	return at
}

// kubeconfigFor is a copy of the admin kubeconfig kc that names node i's forwarded API port.
func kubeconfigFor(t *testing.T, c *cluster, kc string, i int) string {
	t.Helper()
	data, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", c.Nodes[0].Ports[6443])
	if !strings.Contains(string(data), server) {
		t.Fatalf("kubeconfig does not name the first node's API %s:\n%s", server, data)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig-"+c.Nodes[i].Name)
	mine := fmt.Sprintf("https://127.0.0.1:%d", c.Nodes[i].Ports[6443])
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(data), server, mine)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
