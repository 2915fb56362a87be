//go:build integration

package etcdops

// TestCairnctlEtcdThroughTheAPI drives the bundle's etcd through the whole chain a user has: cairnctl's
// `etcd members` and `etcd snapshot FILE` against a machine API server whose EtcdOps is this package's
// Client; then the saved file is restored and read back.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/server"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

const apiToken = "day2-token"

type noSys struct{}

func (noSys) Reboot() error   { return nil }
func (noSys) PowerOff() error { return nil }

// serveAPI serves the machine API in maintenance mode with ops as its EtcdOps and returns its address.
func serveAPI(t *testing.T, ops server.EtcdOps) string {
	t.Helper()
	bus := events.NewBus(nil, nil)
	creds, err := server.NewCredentials("n1", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n := node.New(node.Options{Paths: paths.Paths{Root: t.TempDir()}, Bus: bus, Sys: noSys{}, API: creds, Sandbox: true,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g := server.New(&server.Server{Node: n, Bus: bus, Supervise: supervisor.New(bus, nil), EtcdOps: ops},
		&server.Auth{Creds: creds, Token: apiToken, Bus: bus})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(l)
	t.Cleanup(func() { g.Stop(); cancel() })
	return l.Addr().String()
}

func buildCairnctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cairnctl")
	start := time.Now()
	out, err := exec.Command("go", "build", "-o", bin, "../../../cairnctl").CombinedOutput()
	if err != nil {
		t.Fatalf("build cairnctl: %v\n%s", err, out)
	}
	t.Logf("built cairnctl in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

func TestCairnctlEtcdThroughTheAPI(t *testing.T) {
	bin := etcdBinary(t)
	cairnctl := buildCairnctl(t)
	p := newTestPKI(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	_, c1, stop1 := startEtcd(t, bin, p, filepath.Join(t.TempDir(), "etcd1"), "n1", "")
	cli := kv(t, c1)
	// Values worth several chunks, so the snapshot travels in several.
	big := strings.Repeat("x", 1<<20)
	for i := 0; i < 4; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/configmaps/default/big-%d", i), big); err != nil {
			t.Fatal(err)
		}
	}
	addr := serveAPI(t, c1)
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, cairnctl, append([]string{"--nodes", addr, "--token", apiToken, "--insecure-skip-verify"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return string(out) + stderr.String(), err
		}
		return string(out), nil
	}

	out, err := run("-o", "json", "etcd", "members")
	if err != nil {
		t.Fatalf("cairnctl etcd members: %v\n%s", err, out)
	}
	var members struct {
		Members []struct{ Name string } `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &members); err != nil || len(members.Members) != 1 || members.Members[0].Name != "n1" {
		t.Fatalf("cairnctl etcd members -o json = %s (%v), want the one member n1", out, err)
	}

	file := filepath.Join(t.TempDir(), "backup.db")
	start := time.Now()
	out, err = run("etcd", "snapshot", file)
	if err != nil {
		t.Fatalf("cairnctl etcd snapshot: %v\n%s", err, out)
	}
	t.Logf("cairnctl etcd snapshot in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	if !strings.Contains(out, "wrote "+file) || !strings.Contains(out, "sha256 ") {
		t.Errorf("cairnctl etcd snapshot printed %q, want the file, its size and its checksum", out)
	}
	if out, err := run("etcd", "snapshot", file); err == nil || !strings.Contains(out, "--force") {
		t.Errorf("cairnctl etcd snapshot onto an existing file = %v, %q; want a refusal naming --force", err, out)
	}
	stop1()
	if out, err := run("etcd", "members"); err == nil || !strings.Contains(out, "Unavailable") {
		t.Errorf("cairnctl etcd members with etcd stopped = %v, %q; want Unavailable", err, out)
	}

	data := filepath.Join(t.TempDir(), "etcd2")
	peer := "https://127.0.0.1:" + fmt.Sprint(freePort(t))
	if err := Restore(ctx, bundleEtcdutl(t), file, data, Member{Name: "n2", PeerURL: peer}); err != nil {
		t.Fatalf("Restore(cairnctl's snapshot) = %v", err)
	}
	_, c2, _ := startEtcd(t, bin, p, data, "n2", peer)
	resp, err := kv(t, c2).Get(ctx, "/registry/configmaps/default/big-3")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != big {
		t.Errorf("restored cluster holds %d values for the key, want the one written (%d bytes)", len(resp.Kvs), len(big))
	}
}
