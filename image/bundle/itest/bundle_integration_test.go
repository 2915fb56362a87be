//go:build integration

// Package itest checks a built bundle (_out/bundle) the way a node uses it:
// the binaries report the pinned versions, the built containerd imports
// images.tar under the exact names, and the images run.
//
//	cd image/bundle && go test -tags integration -count=1 -v ./itest/
//
// Needs root; skips when the bundle has not been built.
package itest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

func bundleDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CAIRN_BUNDLE_OUT")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "_out", "bundle")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "stamp")); err != nil {
		t.Skipf("bundle not built in %s: run `cd image/bundle && go run ./cmd/bundle` (or hack/bundle/build.sh) first", dir)
	}
	return dir
}

func loadVersions(t *testing.T) versions.Versions {
	t.Helper()
	v, err := versions.Load(filepath.Join("..", "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestBinariesReportPinnedVersions(t *testing.T) {
	out := bundleDir(t)
	v := loadVersions(t)
	bin := func(name string) string { return filepath.Join(out, "bin", name) }
	tests := []struct {
		argv []string
		env  []string
		want string
	}{
		{[]string{bin("kube"), "kube-apiserver", "--version"}, nil, "Kubernetes " + v.Kubernetes},
		{[]string{bin("kube"), "kube-controller-manager", "--version"}, nil, "Kubernetes " + v.Kubernetes},
		{[]string{bin("kube"), "kube-scheduler", "--version"}, nil, "Kubernetes " + v.Kubernetes},
		{[]string{bin("kube"), "kubelet", "--version"}, nil, "Kubernetes " + v.Kubernetes},
		{[]string{bin("kube"), "kube-proxy", "--version"}, nil, "Kubernetes " + v.Kubernetes},
		{[]string{bin("kubectl"), "version", "--client"}, nil, "Client Version: " + v.Kubernetes},
		{[]string{bin("kube"), "coredns", "-version"}, nil, "CoreDNS-" + strings.TrimPrefix(v.CoreDNS, "v")},
		{[]string{bin("kube"), "flanneld", "--version"}, nil, v.Flannel},
		{[]string{bin("etcd"), "--version"}, nil, "etcd Version: " + strings.TrimPrefix(v.Etcd, "v")},
		{[]string{bin("containerd"), "--version"}, nil, "containerd github.com/containerd/containerd/v2 " + v.Containerd},
		{[]string{bin("containerd-shim-runc-v2"), "-v"}, nil, "Version:  " + v.Containerd},
		{[]string{bin("ctr"), "--version"}, nil, v.Containerd},
		{[]string{bin("runc"), "--version"}, nil, "runc version " + strings.TrimPrefix(v.Runc, "v")},
		{[]string{filepath.Join(out, "cni", "bridge")}, nil, "CNI bridge plugin " + v.CNIPlugins},
		{[]string{filepath.Join(out, "cni", "host-local")}, nil, "CNI host-local plugin " + v.CNIPlugins},
		{[]string{filepath.Join(out, "cni", "portmap")}, nil, "CNI portmap plugin " + v.CNIPlugins},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{filepath.Base(tt.argv[0])}, tt.argv[1:]...), " "), func(t *testing.T) {
			cmd := exec.Command(tt.argv[0], tt.argv[1:]...)
			cmd.Env = append(os.Environ(), tt.env...)
			got, _ := cmd.CombinedOutput() // CNI plugins exit 1 after printing their version
			if !strings.Contains(string(got), tt.want) {
				t.Errorf("%q printed %q, want it to contain %q", tt.argv, got, tt.want)
			}
		})
	}
	// CoreDNS's Go flags (-conf, -version, ...) are for CoreDNS alone:
	// kube-proxy, which takes every Go flag into its own, must not show them.
	if help, _ := exec.Command(bin("kube"), "kube-proxy", "--help").CombinedOutput(); !strings.Contains(string(help), "--hostname-override") ||
		strings.Contains(string(help), "Corefile") {
		t.Errorf("kube-proxy --help = %q, want kube-proxy's flags without CoreDNS's", help)
	}
	// The runc shim is a program of its own, not a name of the daemon's binary: one runs per pod, and it
	// must not carry the daemon's package initialisation and heap.
	if fi, err := os.Lstat(bin("containerd-shim-runc-v2")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("bin/containerd-shim-runc-v2 is not a file of its own (%v)", err)
	}
	// Static: the node's root has no libc.
	for _, name := range []string{"kube", "etcd", "pause", "cairn-mount", "containerd", "containerd-shim-runc-v2", "ctr", "runc"} {
		if out, err := exec.Command("ldd", bin(name)).CombinedOutput(); err == nil && !strings.Contains(string(out), "statically linked") {
			t.Errorf("%s is dynamically linked: %s", name, out)
		}
	}
}

// containerd is a throwaway containerd started from the bundle.
type containerd struct {
	t    *testing.T
	out  string // the bundle
	dir  string // its root, state, socket
	sock string
	cmd  *exec.Cmd
}

func startContainerd(t *testing.T, out string, v versions.Versions) *containerd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	// Not t.TempDir(): its long name would push the socket path past the
	// 108-byte limit of a unix socket address.
	dir, err := os.MkdirTemp("", "cairn-ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	c := &containerd{t: t, out: out, dir: dir, sock: filepath.Join(dir, "containerd.sock")}
	// The shim and ctr keep fifos and runc state under /run/containerd
	// whatever the config says; remove what this test created there.
	if _, err := os.Stat("/run/containerd"); os.IsNotExist(err) {
		t.Cleanup(func() { removeEmptyDirs("/run/containerd") })
	}
	t.Cleanup(c.cleanup)

	// This VM lacks CAP_SYS_RESOURCE, so runc cannot lower oom_score_adj:
	// restrict_oom_score_adj keeps CRI from asking it to. NRI and opt are
	// off so the test never touches the host's /var/run/nri or /opt.
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt"]

[grpc]
  address = %[3]q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[4]q]
    conf_dir = %[5]q

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = %[6]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.sock,
		filepath.Join(out, "cni"), filepath.Join(dir, "cni"), "registry.k8s.io/pause:"+v.PauseTag)
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(filepath.Join(out, "bin", "containerd"), "--config", cfgPath)
	// The shim and runc are found through PATH: use the bundle's.
	c.cmd.Env = append(os.Environ(), "PATH="+filepath.Join(out, "bin")+":"+os.Getenv("PATH"))
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	t.Logf("containerd pid %d, dir %s", c.cmd.Process.Pid, dir)

	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.ctr("", "version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Fatalf("containerd did not answer on %s within 30s; log:\n%s", c.sock, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// CRI must have loaded with our config (it is what kubelet talks to).
	if out, err := c.ctr("", "plugins", "ls"); err != nil || !cri(out) {
		t.Errorf("CRI plugins not ok: %v\n%s", err, out)
	}
	return c
}

func cri(pluginsLs string) bool {
	for _, l := range strings.Split(pluginsLs, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && f[0] == "io.containerd.grpc.v1" && f[1] == "cri" {
			return f[len(f)-1] == "ok"
		}
	}
	return false
}

// ctr runs the bundle's ctr against this containerd in namespace ns and
// returns its stdout. Its stderr (log lines, such as containerd's cgroup v1
// deprecation warning on this host) is returned apart.
func (c *containerd) ctr(ns string, args ...string) (string, error) {
	stdout, _, err := c.ctrFull(ns, args...)
	return stdout, err
}

func (c *containerd) ctrFull(ns string, args ...string) (string, string, error) {
	full := []string{"-a", c.sock}
	if ns != "" {
		full = append(full, "-n", ns)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.out, "bin", "ctr"), append(full, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("ctr %s: %w: %s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String(), err
}

// cleanup stops containerd and whatever it started, unmounts what it left
// mounted and removes its directory, even when the test failed half-way.
func (c *containerd) cleanup() {
	for _, ns := range []string{"k8s.io", "local"} {
		if out, err := c.ctr(ns, "tasks", "ls", "-q"); err == nil {
			for _, id := range strings.Fields(out) {
				_, _ = c.ctr(ns, "tasks", "kill", "-s", "SIGKILL", id)
				time.Sleep(200 * time.Millisecond)
				_, _ = c.ctr(ns, "tasks", "rm", "-f", id)
			}
		}
	}
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	}
	// Shims outlive containerd by design; ours are the ones whose command
	// line names our socket.
	for _, pid := range pidsMentioning(c.sock) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, m := range mountsUnder(c.dir) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			c.t.Logf("unmount %s: %v", m, err)
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		c.t.Logf("remove %s: %v", c.dir, err)
	}
}

// removeEmptyDirs removes dir and the directories below it, deepest first,
// as long as they are empty: anything still in use stays.
func removeEmptyDirs(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}

func pidsMentioning(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountsUnder lists mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			ms = append(ms, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ms)))
	return ms
}

// imagesTxt reads images.txt: name -> manifest digest.
func imagesTxt(t *testing.T, out string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("images.txt line %q: want NAME DIGEST", l)
		}
		m[f[0]] = f[1]
	}
	return m
}

// listed parses `ctr images ls`: name -> digest. In the k8s.io namespace
// the CRI plugin adds a sha256:<config digest> reference for every image;
// those are not names and are left out.
func listed(t *testing.T, c *containerd, ns string) map[string]string {
	t.Helper()
	out, err := c.ctr(ns, "images", "ls")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(l)
		if len(f) >= 3 && !strings.HasPrefix(f[0], "sha256:") {
			m[f[0]] = f[2]
		}
	}
	return m
}

func TestContainerdImportsAndRunsBundle(t *testing.T) {
	out := bundleDir(t)
	v := loadVersions(t)
	want := imagesTxt(t, out)
	c := startContainerd(t, out, v)
	archive := filepath.Join(out, "images.tar")

	// Both import paths: ctr's default goes through containerd's transfer
	// service; --local uses client.Import, as machined will.
	start := time.Now()
	if _, err := c.ctr("k8s.io", "images", "import", archive); err != nil {
		t.Fatal(err)
	}
	t.Logf("ctr images import (transfer service) took %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if _, err := c.ctr("local", "images", "import", "--local", archive); err != nil {
		t.Fatal(err)
	}
	t.Logf("ctr images import --local (client.Import) took %s", time.Since(start).Round(time.Millisecond))
	for _, ns := range []string{"k8s.io", "local"} {
		if diff := cmp.Diff(want, listed(t, c, ns)); diff != "" {
			t.Errorf("namespace %s: ctr images ls differs from images.txt (-want +got):\n%s", ns, diff)
		}
	}

	// Each Kubernetes image starts its component through its entrypoint
	// symlink into the shared multi-call binary.
	// (ctr run replaces the image's entrypoint with the arguments given, so
	// the command names the same path as the entrypoint.)
	for _, img := range []struct{ name, cmd, want string }{
		{"registry.k8s.io/kube-apiserver:" + v.Kubernetes, "/usr/local/bin/kube-apiserver", "Kubernetes " + v.Kubernetes},
		{"registry.k8s.io/kube-controller-manager:" + v.Kubernetes, "/usr/local/bin/kube-controller-manager", "Kubernetes " + v.Kubernetes},
		{"registry.k8s.io/kube-scheduler:" + v.Kubernetes, "/usr/local/bin/kube-scheduler", "Kubernetes " + v.Kubernetes},
		{"registry.k8s.io/kube-proxy:" + v.Kubernetes, "/usr/local/bin/kube-proxy", "Kubernetes " + v.Kubernetes},
		{"cairn.local/flannel:" + v.Flannel, "/opt/bin/flanneld", v.Flannel},
		{"cairn.local/kubelet:" + v.Kubernetes, "/usr/local/bin/kubelet", "Kubernetes " + v.Kubernetes},
		{"registry.k8s.io/etcd:" + v.EtcdImageTag(), "/usr/local/bin/etcd", "etcd Version: " + strings.TrimPrefix(v.Etcd, "v")},
	} {
		id := "version-" + strings.NewReplacer("/", "-", ":", "-", ".", "-").Replace(img.name)
		// flanneld prints its version on stderr.
		stdout, stderr, err := c.ctrFull("k8s.io", "run", "--rm", img.name, id, img.cmd, "--version")
		if got := stdout + stderr; err != nil || !strings.Contains(got, img.want) {
			t.Errorf("ctr run %s %s --version = %q, %v; want %q", img.name, img.cmd, got, err, img.want)
		}
	}
	// kubelet's volumes need mount and umount in its image; umount of a
	// path that is no mount point must say "not mounted". Privileged, as
	// machined runs kubelet.
	_, stderr, err := c.ctrFull("k8s.io", "run", "--rm", "--privileged", "cairn.local/kubelet:"+v.Kubernetes, "kubelet-umount", "umount", "/tmp")
	if err == nil || !strings.Contains(err.Error(), "/tmp: not mounted") {
		t.Errorf("umount /tmp in the kubelet image = %v (stderr %q); want a failure saying not mounted", err, stderr)
	}

	t.Run("netfilter tools run inside kube-proxy and flannel", func(t *testing.T) { runNetfilterTools(t, c, v) })
	t.Run("kube-proxy in nftables mode runs no iptables on empty tables", func(t *testing.T) { runProxyCleanup(t, c, v) })
	t.Run("coredns has the chosen plugins", func(t *testing.T) { coreDNSPlugins(t, c, v) })
	t.Run("coredns serves DNS and health", func(t *testing.T) { runCoreDNS(t, c, v) })
	t.Run("coredns binds port 53 as 65532", func(t *testing.T) { coreDNSPort53(t, c, v) })
	t.Run("pause exits 0 on SIGTERM", func(t *testing.T) { runPause(t, c, v) })
}

// freePorts returns n loopback ports nobody listens on now, all different: each one is held open until
// all are picked, since the kernel may hand a just-closed port to the next listener on :0.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func runPause(t *testing.T, c *containerd, v versions.Versions) {
	if _, err := c.ctr("k8s.io", "run", "-d", "registry.k8s.io/pause:"+v.PauseTag, "pause-test"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := c.ctr("k8s.io", "tasks", "kill", "-s", "SIGTERM", "pause-test"); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, c, "pause-test"); code != 0 {
		t.Errorf("pause exit code after SIGTERM = %d, want 0", code)
	}
}

// waitExit waits for a task to stop, deletes it and its container, and
// returns its exit code.
func waitExit(t *testing.T, c *containerd, id string) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _ := c.ctr("k8s.io", "tasks", "ls")
		stopped := false
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == id && f[2] == "STOPPED" {
				stopped = true
			}
		}
		if stopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still running 15s after SIGTERM: %s", id, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// ctr prints nothing for exit code 0 and a warning naming any other.
	_, stderr, err := c.ctrFull("k8s.io", "tasks", "rm", id)
	if err != nil {
		t.Error(err)
	}
	code := 0
	const marker = "exit with non-zero exit code "
	if i := strings.Index(stderr, marker); i >= 0 {
		if _, err := fmt.Sscanf(stderr[i+len(marker):], "%d", &code); err != nil {
			t.Errorf("cannot read exit code from %q", stderr)
		}
	}
	if _, err := c.ctr("k8s.io", "containers", "rm", id); err != nil {
		t.Error(err)
	}
	return code
}
