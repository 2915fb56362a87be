// Package etcdtest runs the bundle's real etcd for integration tests: a throwaway PKI in the kubeadm
// layout's file names, and etcd processes with the flags of Cairn's static pod that matter, on loopback
// or inside a network namespace. It knows nothing of etcdops, so etcdops' own tests use it too.
package etcdtest

import (
	"cmp"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/pki"
)

// Binary is the bundle's etcd (make bundle) in the repository's _out; the test is skipped without it.
func Binary(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for { // up from the package's directory, where go test runs, to the module's root
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("not inside the repository: no _out/bundle")
		}
		dir = parent
	}
	bin := filepath.Join(dir, "_out", "bundle", "bin", "etcd")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no built bundle etcd (make bundle): %v", err)
	}
	return bin
}

// PKI is a throwaway etcd CA with one server/peer certificate every member uses and a client certificate.
type PKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// NewPKI writes the PKI into dir; the server certificate is valid for localhost, 127.0.0.1 and ips.
func NewPKI(t testing.TB, dir string, ips ...net.IP) PKI {
	t.Helper()
	return NewNamedPKI(t, dir, nil, ips...)
}

// NewNamedPKI is NewPKI with a server certificate valid for names too (members reached by name).
func NewNamedPKI(t testing.TB, dir string, names []string, ips ...net.IP) PKI {
	t.Helper()
	now := time.Now()
	caPEM, err := pki.NewCA("etcd-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := caPEM.ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Sign(pki.Request{CommonName: "n1", DNSNames: append([]string{"localhost"}, names...), IPs: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
		Server: true, Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Sign(pki.Request{CommonName: "kube-etcd-healthcheck-client", Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	p := PKI{
		CA: filepath.Join(dir, "ca.crt"), ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "healthcheck-client.crt"), ClientKey: filepath.Join(dir, "healthcheck-client.key"),
	}
	for path, b := range map[string][]byte{p.CA: caPEM.Cert, p.ServerCert: server.Cert, p.ServerKey: server.Key,
		p.ClientCert: client.Cert, p.ClientKey: client.Key} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// handedOut holds every port FreePort returned in this test binary. The kernel may give a port that was
// just closed to the next listener on :0, so two calls in a row can return the same one (a member's
// peer and metrics URLs once did, and etcd refused to start with "address already in use").
var handedOut sync.Map

// FreePort returns a loopback port nobody listens on now and that no earlier call returned.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if _, taken := handedOut.LoadOrStore(port, true); !taken {
			return port
		}
	}
	t.Fatal("no loopback port that was not handed out before in 100 tries")
	return 0
}

// Member is one etcd process to start.
type Member struct {
	Bin, Name, DataDir string
	PKI                PKI
	// ClientURL and PeerURL are advertised and listened on; "" picks a free loopback port.
	ClientURL, PeerURL string
	// ListenClient listens on other client URLs than ClientURL (a VIP's traffic reaches every address),
	// ListenPeer on another peer URL than PeerURL (a member that advertises a name).
	ListenClient, ListenPeer string
	// InitialCluster is etcd's --initial-cluster for a member joining an existing cluster, this member
	// included, or for a new cluster of several members (then New); "" starts a new cluster of one.
	InitialCluster string
	New            bool
	// NetNS is a named network namespace (/run/netns/NAME) to run etcd in; "" this process's.
	NetNS string
	// Hosts is a file etcd sees as its /etc/hosts (bind-mounted in a mount namespace of its own), as a
	// node's etcd pod sees the node's; "" the host's.
	Hosts string
}

// Proc is a started etcd.
type Proc struct {
	Name, ClientURL, PeerURL string
	cmd                      *exec.Cmd
	done                     chan struct{}
	out                      *os.File
}

// Start runs m until the test ends or Stop or Kill is called. It does not wait until etcd answers: a
// learner and a member without quorum answer different calls, so the caller knows what to wait for.
func Start(t testing.TB, m Member) *Proc {
	t.Helper()
	if m.ClientURL == "" {
		m.ClientURL = "https://127.0.0.1:" + strconv.Itoa(FreePort(t))
	}
	if m.PeerURL == "" {
		m.PeerURL = "https://127.0.0.1:" + strconv.Itoa(FreePort(t))
	}
	initial, state := m.Name+"="+m.PeerURL, "new"
	if m.InitialCluster != "" {
		initial, state = m.InitialCluster, "existing"
		if m.New {
			state = "new"
		}
	}
	metrics := "http://127.0.0.1:" + strconv.Itoa(FreePort(t))
	if m.NetNS != "" {
		metrics = "http://127.0.0.1:2381" // the namespace's own loopback
	}
	args := []string{m.Bin, "--name", m.Name, "--data-dir", m.DataDir,
		"--listen-client-urls", cmp.Or(m.ListenClient, m.ClientURL), "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", cmp.Or(m.ListenPeer, m.PeerURL), "--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", initial, "--initial-cluster-state", state,
		"--cert-file", m.PKI.ServerCert, "--key-file", m.PKI.ServerKey, "--trusted-ca-file", m.PKI.CA, "--client-cert-auth",
		"--peer-cert-file", m.PKI.ServerCert, "--peer-key-file", m.PKI.ServerKey, "--peer-trusted-ca-file", m.PKI.CA,
		"--peer-client-cert-auth", "--listen-metrics-urls", metrics}
	if m.Hosts != "" {
		args = append([]string{"unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
			`mount --bind "$0" /etc/hosts && exec "$@"`, m.Hosts}, args...)
	}
	if m.NetNS != "" {
		args = append([]string{"nsenter", "--net=/run/netns/" + m.NetNS, "--"}, args...)
	}
	logFile := filepath.Join(t.TempDir(), m.Name+".log")
	out, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Name: m.Name, ClientURL: m.ClientURL, PeerURL: m.PeerURL, cmd: cmd, done: make(chan struct{}), out: out}
	go func() { cmd.Wait(); out.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(logFile); err == nil {
				if len(b) > 3000 {
					b = b[len(b)-3000:]
				}
				t.Logf("etcd %s log (last 3000 bytes):\n%s", m.Name, b)
			}
		}
	})
	return p
}

// Stop ends etcd as a shutdown would (SIGTERM, then SIGKILL after 10 s).
func (p *Proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// Kill ends etcd as a power cut would.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}
