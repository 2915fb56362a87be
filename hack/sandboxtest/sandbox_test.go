//go:build integration

// Package sandboxtest drives sandbox-mode machined (an ordinary process under --root) only through the
// cairnctl binary, from Boot to Running, across restarts and SIGKILLs.
package sandboxtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var bin string // directory with the freshly built machined and cairnctl

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cairn-sandbox-bin-")
	if err != nil {
		panic(err)
	}
	for _, b := range []string{"machined", "cairnctl"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b), "github.com/cairn-os/cairn/"+b)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b, err, out)
			os.Exit(1)
		}
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// machined is one sandbox node process.
type machined struct {
	t    *testing.T
	root string
	addr string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startMachined(t *testing.T, root, addr string) *machined {
	t.Helper()
	m := &machined{t: t, root: root, addr: addr, log: &syncBuffer{}, done: make(chan error, 1)}
	m.cmd = exec.Command(filepath.Join(bin, "machined"), "--root", root, "--listen", addr, "--token", "t0k")
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(func() { m.kill() })
	// Wait for the listener; the first RPC tells the rest.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("machined did not listen on %s:\n%s", addr, m.log)
	return nil
}

func (m *machined) kill() {
	if m.cmd.ProcessState == nil {
		m.cmd.Process.Kill()
		<-m.done
		m.done <- nil // a second kill() returns at once
	}
}

func (m *machined) fingerprint() string {
	re := regexp.MustCompile(`fingerprint=([0-9a-f]{64})`)
	if f := re.FindStringSubmatch(m.log.String()); f != nil {
		return f[1]
	}
	m.t.Fatalf("no fingerprint in machined's log:\n%s", m.log)
	return ""
}

// cairnctl runs the CLI and returns its stdout, stderr and whether it succeeded.
func cairnctl(t *testing.T, dir string, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "cairnctl"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "CAIRNCONFIG=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

func must(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, errOut, ok := cairnctl(t, dir, args...)
	if !ok {
		t.Fatalf("cairnctl %s failed:\n%s%s", strings.Join(args, " "), out, errOut)
	}
	return out
}

func genConfig(t *testing.T, dir string) {
	must(t, dir, "gen", "config", "--cluster-name", "sbx", "--endpoint", "https://127.0.0.1:6443",
		"--state-disk", "tmpfs", "--ephemeral-disk", "tmpfs", "--etcd-disk", "tmpfs")
}

type statusJSON struct {
	State    string `json:"state"`
	LockedBy string `json:"locked_by"`
	APIMode  string `json:"api_mode"`
	Sequence string `json:"sequence"`
}

func statusOf(t *testing.T, dir string, args ...string) (statusJSON, string, bool) {
	out, errOut, ok := cairnctl(t, dir, append(args, "status", "-o", "json")...)
	var s statusJSON
	if ok {
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("status -o json printed %q: %v", out, err)
		}
	}
	return s, errOut, ok
}

func TestBootToRunningThroughCairnctl(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	m := startMachined(t, root, freeAddr(t))
	genConfig(t, dir)
	for _, f := range []string{"secrets.yaml", "controlplane.yaml", "worker.yaml", "cairnconfig"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("gen config did not write %s", f)
		}
	}
	if _, errOut, ok := cairnctl(t, dir, "gen", "config", "--cluster-name", "sbx", "--endpoint", "https://127.0.0.1:6443"); ok || !strings.Contains(errOut, "--force") {
		t.Errorf("gen config over existing files: ok=%v, %q; want a refusal naming --force", ok, errOut)
	}
	maint := []string{"--nodes", m.addr, "--token", "t0k", "--fingerprint", m.fingerprint()}
	mtls := []string{"--cairnconfig", filepath.Join(dir, "cairnconfig"), "--nodes", m.addr}

	out := must(t, dir, append(maint, "status")...)
	if !regexp.MustCompile(`state:\s+Boot`).MatchString(out) || !strings.Contains(out, "maintenance") {
		t.Fatalf("status in maintenance mode:\n%s", out)
	}
	if _, errOut, ok := cairnctl(t, dir, "--nodes", m.addr, "--token", "wrong", "--insecure-skip-verify", "status"); ok || !strings.Contains(errOut, "Unauthenticated") {
		t.Errorf("wrong token: ok=%v stderr=%q, want Unauthenticated", ok, errOut)
	}
	if _, errOut, ok := cairnctl(t, dir, "--nodes", m.addr, "--token", "t0k", "status"); ok || !strings.Contains(errOut, "--fingerprint") {
		t.Errorf("no pin: ok=%v stderr=%q, want advice to pin with --fingerprint", ok, errOut)
	}

	// A broken config is refused with every problem, and nothing changes.
	bad := strings.Replace(string(mustRead(t, filepath.Join(dir, "controlplane.yaml"))), "type: controlplane", "type: boss", 1)
	bad = strings.Replace(bad, "podCIDR: 10.244.0.0/16", "podCIDR: 10.96.1.0/24", 1)
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(bad), 0o600)
	if _, errOut, ok := cairnctl(t, dir, append(maint, "init", "--config", "bad.yaml")...); ok ||
		!strings.Contains(errOut, "InvalidArgument") || !strings.Contains(errOut, "machine.type") || !strings.Contains(errOut, "cluster.network.podCIDR") {
		t.Errorf("init with a bad config: ok=%v stderr=%q", ok, errOut)
	}

	out = must(t, dir, append(maint, "init", "--config", "controlplane.yaml")...)
	for _, want := range []string{"node lock taken by init", "init: machine-certificate done", "Init → Running", "init finished"} {
		if !strings.Contains(out, want) {
			t.Errorf("init output lacks %q:\n%s", want, out)
		}
	}
	if s, errOut, ok := statusOf(t, dir, mtls...); !ok || s.State != "Running" || s.APIMode != "mtls" {
		t.Fatalf("mTLS status after init: %+v %s", s, errOut)
	}
	if _, errOut, ok := cairnctl(t, dir, append(maint, "status")...); ok {
		t.Error("the bootstrap token still works after init")
	} else if !strings.Contains(errOut, "fingerprint") && !strings.Contains(errOut, "Unauthenticated") {
		t.Errorf("token after init refused with %q", errOut)
	}
	if _, errOut, ok := cairnctl(t, dir, "--nodes", m.addr, "--token", "t0k", "--insecure-skip-verify", "status"); ok || !strings.Contains(errOut, "Unauthenticated") {
		t.Errorf("token (unpinned) after init: ok=%v %q, want Unauthenticated", ok, errOut)
	}
	if out := must(t, dir, append(mtls, "services")...); !strings.Contains(out, "machined") {
		t.Errorf("services:\n%s", out)
	}

	must(t, dir, append(mtls, "reboot")...)
	waitStatus(t, dir, mtls, "Running")
	if out := must(t, dir, append(mtls, "events")...); !strings.Contains(out, "Reboot → Boot") {
		t.Errorf("events after reboot lack the reboot:\n%s", out)
	}
	must(t, dir, append(mtls, "shutdown")...)
	select {
	case err := <-m.done:
		if err != nil {
			t.Errorf("machined exited with %v after shutdown, want 0", err)
		}
		m.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("machined still runs 10s after shutdown")
	}
}

func waitStatus(t *testing.T, dir string, args []string, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last statusJSON
	var lastErr string
	for time.Now().Before(deadline) {
		s, errOut, ok := statusOf(t, dir, args...)
		if ok && s.State == want && s.Sequence == "" {
			return
		}
		last, lastErr = s, errOut
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("status never reached %s: last %+v %s", want, last, lastErr)
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var onceTasks = []string{"store-identity", "machine-certificate"}

// TestSIGKILLDuringInit kills machined at random points of Init and restarts it: once the lock file
// exists the node never serves the bootstrap token again, and no once-only task runs after it finished.
func TestSIGKILLDuringInit(t *testing.T) {
	dir := t.TempDir()
	genConfig(t, dir)
	mtls := func(addr string) []string {
		return []string{"--cairnconfig", filepath.Join(dir, "cairnconfig"), "--nodes", addr}
	}
	for round := 0; round < 12; round++ {
		root := t.TempDir()
		addr := freeAddr(t)
		var logs []string
		certs := map[string]bool{}
		for boot := 0; ; boot++ {
			if boot > 8 {
				t.Fatalf("round %d: not Running after %d boots", round, boot)
			}
			m := startMachined(t, root, addr)
			locked := fileExists(filepath.Join(root, "system/state/lock.json"))
			if locked {
				waitDecided(t, dir, mtls(addr))
				if _, _, ok := cairnctl(t, dir, "--nodes", addr, "--token", "t0k", "--insecure-skip-verify", "status"); ok {
					t.Fatalf("round %d boot %d: a locked node answered the bootstrap token", round, boot)
				}
			} else {
				// The API answers before the boot sequence has decided; until then Init is Unavailable,
				// saying so, and a user tries again.
				var errOut string
				var ok bool
				for try := 0; try < 50; try++ {
					_, errOut, ok = cairnctl(t, dir, "--nodes", addr, "--token", "t0k", "--insecure-skip-verify", "init", "--detach", "--config", "controlplane.yaml")
					if ok || !strings.Contains(errOut, "is booting") {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if !ok {
					t.Fatalf("round %d boot %d: init: %s\n%s", round, boot, errOut, m.log)
				}
			}
			if boot < 3 {
				time.Sleep(time.Duration(rand.IntN(25)) * time.Millisecond)
				m.kill()
			} else {
				waitStatus(t, dir, mtls(addr), "Running")
				m.kill()
			}
			logs = append(logs, m.log.String())
			// Once the lock records the certificate as issued, it must never change again.
			if l, _ := os.ReadFile(filepath.Join(root, "system/state/lock.json")); strings.Contains(string(l), `"machine-certificate"`) {
				certs[string(mustRead(t, filepath.Join(root, "system/state/pki/machine.crt")))] = true
			}
			if boot >= 3 {
				break
			}
		}
		checkOnce(t, round, logs)
		if len(certs) > 1 {
			t.Errorf("round %d: the machine certificate changed after it was recorded as issued (%d versions)", round, len(certs))
		}
		lock := string(mustRead(t, filepath.Join(root, "system/state/lock.json")))
		for _, task := range onceTasks {
			if strings.Count(lock, `"`+task+`"`) != 1 {
				t.Errorf("round %d: lock records %s %d times:\n%s", round, task, strings.Count(lock, task), lock)
			}
		}
	}
}

// waitDecided waits until the restarted node has read its lock (it answers Unavailable until then).
func waitDecided(t *testing.T, dir string, args []string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, errOut, ok := statusOf(t, dir, args...); ok || !strings.Contains(errOut, "booting") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkOnce reads machined's logs of every boot in order: once a once-only task finished (done) in one
// boot, no later boot may start it again.
func checkOnce(t *testing.T, round int, logs []string) {
	t.Helper()
	for _, task := range onceTasks {
		finished := -1
		for boot, log := range logs {
			sc := bufio.NewScanner(strings.NewReader(log))
			for sc.Scan() {
				line := sc.Text()
				if !strings.Contains(line, "task="+task+" ") {
					continue
				}
				if strings.Contains(line, "outcome=started") && finished >= 0 {
					t.Errorf("round %d: %s started again in boot %d after finishing in boot %d", round, task, boot, finished)
				}
				if strings.Contains(line, "outcome=done") && finished < 0 {
					finished = boot
				}
			}
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
