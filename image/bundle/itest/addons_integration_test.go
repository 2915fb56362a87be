//go:build integration

package itest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

// runNetfilterTools runs nft and iptables inside the kube-proxy and flannel
// images: they must start (their libraries and loader resolve inside the
// image), be the build host's very programs, and reach the kernel's
// nf_tables from the container's own network namespace.
func runNetfilterTools(t *testing.T, c *containerd, v versions.Versions) {
	want := map[string]string{}
	for _, tool := range []string{"nft", "iptables"} {
		out, err := exec.Command("/usr/sbin/"+tool, "--version").Output()
		if err != nil {
			t.Fatalf("host %s --version: %v (hack/deps.sh bundle installs it)", tool, err)
		}
		want[tool] = string(out)
	}
	for _, img := range []string{"registry.k8s.io/kube-proxy:" + v.Kubernetes, "cairn.local/flannel:" + v.Flannel} {
		for _, tool := range []string{"nft", "iptables"} {
			// A bare name: found through the image's PATH, as kube-proxy
			// and flannel find them.
			got, err := c.ctr("k8s.io", "run", "--rm", img, runID("tool", img, tool), tool, "--version")
			if err != nil || got != want[tool] {
				t.Errorf("%s: %s --version = %q, %v; want the host's %q", img, tool, got, err, want[tool])
			}
		}
		// Privileged, as kube-proxy and flannel run, in a network
		// namespace of its own, so the host's rules are not touched.
		got, err := c.ctr("k8s.io", "run", "--rm", "--privileged", img, runID("iptables-nat", img, ""), "iptables", "-t", "nat", "-S")
		if err != nil || !strings.Contains(got, "-P POSTROUTING ACCEPT") {
			t.Errorf("%s: iptables -t nat -S = %q, %v; want the empty nat table's policies", img, got, err)
		}
		if _, err := c.ctr("k8s.io", "run", "--rm", "--privileged", img, runID("nft-list", img, ""), "nft", "list", "ruleset"); err != nil {
			t.Errorf("%s: nft list ruleset: %v", img, err)
		}
	}
}

func runID(prefix, img, suffix string) string {
	id := prefix + "-" + strings.NewReplacer("/", "-", ":", "-", ".", "-").Replace(img)
	if suffix != "" {
		id += "-" + suffix
	}
	return id
}

// coreDNSPlugins checks the plugin set of the image's binary: what Cairn's
// Corefile and common cluster configurations use is there, the plugins left
// out for their SDKs or their lookups of methods by name are not
// (image/bundle/kube/coredns.go).
func coreDNSPlugins(t *testing.T, c *containerd, v versions.Versions) {
	img := "registry.k8s.io/coredns/coredns:" + v.CoreDNS
	got, err := c.ctr("k8s.io", "run", "--rm", img, "coredns-plugins", "/coredns", "-plugins")
	if err != nil {
		t.Fatal(err)
	}
	plugins := strings.Fields(got)
	for _, p := range []string{"errors", "health", "ready", "kubernetes", "prometheus", "forward", "cache", "loop",
		"reload", "loadbalance", "log", "hosts", "rewrite", "whoami", "k8s_external", "sign", "grpc"} {
		if !slices.Contains(plugins, p) {
			t.Errorf("coredns -plugins lacks %s: %v", p, plugins)
		}
	}
	for _, p := range []string{"route53", "azure", "clouddns", "etcd", "trace", "geoip", "nomad", "dynupdate", "dnssec", "template", "view"} {
		if slices.Contains(plugins, p) {
			t.Errorf("coredns -plugins has %s, which is left out (see image/bundle/kube/coredns.go)", p)
		}
	}
	if got, err := c.ctr("k8s.io", "run", "--rm", img, "coredns-version", "/coredns", "-version"); err != nil ||
		!strings.Contains(got, "CoreDNS-"+strings.TrimPrefix(v.CoreDNS, "v")) {
		t.Errorf("coredns -version = %q, %v; want CoreDNS-%s", got, err, strings.TrimPrefix(v.CoreDNS, "v"))
	}
}

// corefileDir writes a Corefile into a directory the image's user (65532)
// can read, for a read-only bind mount at /etc/coredns.
func corefileDir(t *testing.T, corefile string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Corefile"), []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	return "type=bind,src=" + dir + ",dst=/etc/coredns,options=rbind:ro"
}

// runCoreDNS serves a Corefile that strings most of the plugins a cluster
// uses in one chain (so they load together in the standard directive order)
// on the host network, and queries it: a hosts entry, a rewritten name, the
// same through a second server that forwards, and the health, ready and
// metrics endpoints.
func runCoreDNS(t *testing.T, c *containerd, v versions.Versions) {
	ports := freePorts(t, 5)
	port, fwdPort, health, ready, metrics := ports[0], ports[1], ports[2], ports[3], ports[4]
	corefile := fmt.Sprintf(`cairn.test:%[1]d {
    bind 127.0.0.1
    errors
    log
    health 127.0.0.1:%[3]d
    ready 127.0.0.1:%[4]d
    prometheus 127.0.0.1:%[5]d
    reload 2s
    loop
    loadbalance
    rewrite name exact alias.cairn.test. api.cairn.test. answer auto
    cache 30
    hosts {
        10.1.2.3 api.cairn.test
        fallthrough
    }
    whoami
}
.:%[2]d {
    bind 127.0.0.1
    errors
    forward . 127.0.0.1:%[1]d
}
`, port, fwdPort, health, ready, metrics)
	img := "registry.k8s.io/coredns/coredns:" + v.CoreDNS
	if _, err := c.ctr("k8s.io", "run", "-d", "--net-host", "--mount", corefileDir(t, corefile), img, "coredns-serve",
		"/coredns", "-conf", "/etc/coredns/Corefile"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := c.ctr("k8s.io", "tasks", "kill", "-s", "SIGTERM", "coredns-serve"); err != nil {
			t.Error(err)
		}
		if code := waitExit(t, c, "coredns-serve"); code != 0 {
			t.Errorf("coredns exit code after SIGTERM = %d, want 0", code)
		}
	}()

	if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/ready", ready)); body != "OK" {
		t.Errorf("GET /ready = %q, want OK", body)
	}
	if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/health", health)); body != "OK" {
		t.Errorf("GET /health = %q, want OK", body)
	}
	if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)); !strings.Contains(body, "coredns_build_info") {
		t.Errorf("GET /metrics lacks coredns_build_info")
	}
	for _, q := range []struct {
		port       int
		name, want string
	}{
		{port, "api.cairn.test", "10.1.2.3"},
		{port, "alias.cairn.test", "10.1.2.3"},
		{fwdPort, "api.cairn.test", "10.1.2.3"},
	} {
		addrs, err := lookup(q.port, q.name)
		if err != nil || !slices.Equal(addrs, []string{q.want}) {
			t.Errorf("lookup %s at port %d = %v, %v; want [%s]", q.name, q.port, addrs, err, q.want)
		}
	}
}

// coreDNSPort53 starts the image as it is (user 65532, no capability) on
// port 53 in network namespaces of its own, as its pod runs: where the pod's
// sysctl net.ipv4.ip_unprivileged_port_start=53 is set (machined's CoreDNS
// Deployment), CoreDNS serves; where ports below 1024 stay privileged, it
// cannot bind (nothing else grants it port 53).
func coreDNSPort53(t *testing.T, c *containerd, v versions.Versions) {
	img := "registry.k8s.io/coredns/coredns:" + v.CoreDNS
	for _, tt := range []struct {
		name        string
		portStart   string // the netns' ip_unprivileged_port_start; "" leaves the default, 1024
		wantServing bool
	}{
		{"sysctl", "53", true},
		{"default", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			netns := newNetns(t, "cairn-dns-"+tt.name)
			if tt.portStart != "" {
				if out, err := exec.Command("ip", "netns", "exec", netns, "sysctl", "-w", "net.ipv4.ip_unprivileged_port_start="+tt.portStart).CombinedOutput(); err != nil {
					t.Fatalf("set the sysctl in %s: %v: %s", netns, err, out)
				}
			}
			id := "coredns-53-" + tt.name
			log := filepath.Join(t.TempDir(), "coredns.log")
			if _, err := c.ctr("k8s.io", "run", "-d", "--log-uri", "file://"+log, "--with-ns", "network:/var/run/netns/"+netns,
				"--mount", corefileDir(t, ".:53 {\n    whoami\n}\n"), img, id, "/coredns", "-conf", "/etc/coredns/Corefile"); err != nil {
				t.Fatal(err)
			}
			// CoreDNS prints its banner once every listener is up; a failed
			// bind ends the process with an error instead.
			var out []byte
			running := true
			for deadline := time.Now().Add(20 * time.Second); running && time.Now().Before(deadline); {
				if out, _ = os.ReadFile(log); strings.Contains(string(out), "CoreDNS-") {
					break
				}
				time.Sleep(200 * time.Millisecond)
				running = taskRunning(c, id)
			}
			serving := running && strings.Contains(string(out), ".:53")
			if _, err := c.ctr("k8s.io", "tasks", "kill", "-s", "SIGKILL", id); err != nil && running {
				t.Error(err)
			}
			waitExit(t, c, id)
			out, _ = os.ReadFile(log) // all of it, now that the task has exited
			if serving != tt.wantServing {
				t.Errorf("coredns as 65532 on :53 with ip_unprivileged_port_start=%q: serving %v, want %v; log:\n%s", tt.portStart, serving, tt.wantServing, out)
			}
			if !tt.wantServing && !strings.Contains(string(out), "permission denied") {
				t.Errorf("coredns log = %q, want the bind refused (permission denied)", out)
			}
		})
	}
}

// newNetns makes a named network namespace (ip netns) for one test.
func newNetns(t *testing.T, name string) string {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", name, err, out)
		}
	})
	return name
}

func taskRunning(c *containerd, id string) bool {
	tasks, _ := c.ctr("k8s.io", "tasks", "ls")
	for _, l := range strings.Split(tasks, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == id {
			return f[2] == "RUNNING"
		}
	}
	return false
}

// lookup resolves name's addresses with Go's resolver against 127.0.0.1:port.
func lookup(port int, name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.LookupHost(ctx, name)
}

// httpGet polls url until it answers 200 (or 20 s pass) and returns the body.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return strings.TrimSpace(string(b))
			}
			last = fmt.Sprintf("%s: %s", resp.Status, b)
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("GET %s: no 200 within 20s (last: %s)", url, last)
	return ""
}
