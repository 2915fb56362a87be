package modprobe

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/internal/modload"
)

// fakeNode is a node's modules directory and kernel: what is loaded, what each load did, the kernel log.
type fakeNode struct {
	dir    string
	loaded []string
	calls  []string
	fail   map[string]error
	line   string // the node's command line
	log    []string
	stderr bytes.Buffer
}

func newFakeNode(t *testing.T, loaded ...string) *fakeNode {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"cairn.load": "kernel/net/netfilter/x_tables.ko\n",
		"modules.dep": "kernel/net/netfilter/x_tables.ko:\n" +
			"kernel/net/netfilter/xt_u32.ko: kernel/net/netfilter/x_tables.ko\n" +
			"kernel/net/ipv4/ip_tunnel.ko:\nkernel/net/ipv4/tunnel4.ko:\n" +
			"kernel/net/ipv4/ipip.ko: kernel/net/ipv4/tunnel4.ko kernel/net/ipv4/ip_tunnel.ko\n",
		"modules.alias":   "alias ipt_u32 xt_u32\nalias rtnl-link-ipip ipip\n",
		"modules.builtin": "kernel/net/sched/sch_ingress.ko\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &fakeNode{dir: dir, loaded: loaded, fail: map[string]error{}}
}

func (n *fakeNode) system() system {
	return system{
		dir:    n.dir,
		loaded: func() []string { return n.loaded },
		params: modload.ParseParams(n.line),
		load: func(file, params string) error {
			rel, _ := filepath.Rel(n.dir, file)
			n.calls = append(n.calls, strings.TrimSpace(rel+" "+params))
			if err := n.fail[filepath.Base(file)]; err != nil {
				return err
			}
			n.loaded = append(n.loaded, strings.TrimSuffix(filepath.Base(file), ".ko"))
			return nil
		},
		kernlog: func(level int, msg string) { n.log = append(n.log, fmt.Sprintf("<%d>%s", level, msg)) },
		stderr:  &n.stderr,
	}
}

// A request's module gets the parameters the command line has for it, as kmod's modprobe gives them.
func TestRunPassesCommandLineParams(t *testing.T) {
	n := newFakeNode(t)
	n.line = "quiet ipip.log_ecn_error=0 x_tables.bogus=1 tunnel4.y"
	if got := run([]string{"-q", "--", "rtnl-link-ipip"}, n.system()); got != 0 {
		t.Fatalf("run = %d, want 0; log %q", got, n.log)
	}
	want := []string{"kernel/net/ipv4/ip_tunnel.ko", "kernel/net/ipv4/tunnel4.ko y", "kernel/net/ipv4/ipip.ko log_ecn_error=0"}
	if diff := cmp.Diff(want, n.calls); diff != "" {
		t.Errorf("files loaded with their parameters (-want +got):\n%s", diff)
	}
}

// A module the command line blacklists is not loaded, the kernel log says why, and the request fails.
func TestRunLeavesOutBlacklisted(t *testing.T) {
	n := newFakeNode(t)
	n.line = "modprobe.blacklist=ipip"
	if got := run([]string{"-q", "--", "rtnl-link-ipip"}, n.system()); got != 1 {
		t.Errorf("run = %d, want 1", got)
	}
	want := []string{"kernel/net/ipv4/ip_tunnel.ko", "kernel/net/ipv4/tunnel4.ko"}
	if diff := cmp.Diff(want, n.calls); diff != "" {
		t.Errorf("files loaded (-want +got):\n%s", diff)
	}
	if len(n.log) != 1 || !strings.Contains(n.log[0], "<5>modprobe rtnl-link-ipip: ipip left out: modprobe.blacklist") {
		t.Errorf("kernel log = %q, want ipip left out", n.log)
	}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		loaded    []string
		fail      map[string]error
		status    int
		wantCalls []string
		wantLog   []string
	}{
		{
			name: "the kernel asks for a link type", args: []string{"-q", "--", "rtnl-link-ipip"}, status: 0,
			wantCalls: []string{"kernel/net/ipv4/ip_tunnel.ko", "kernel/net/ipv4/tunnel4.ko", "kernel/net/ipv4/ipip.ko"},
			wantLog:   []string{"<6>modprobe rtnl-link-ipip: loaded ip_tunnel, tunnel4, ipip"},
		},
		{
			name: "a match whose dependency the boot loaded", args: []string{"-q", "--", "ipt_u32"}, loaded: []string{"x_tables"}, status: 0,
			wantCalls: []string{"kernel/net/netfilter/xt_u32.ko"},
			wantLog:   []string{"<6>modprobe ipt_u32: loaded xt_u32"},
		},
		{
			name: "loaded meanwhile by another request", args: []string{"-q", "--", "xt_u32"}, fail: map[string]error{"xt_u32.ko": syscall.EEXIST}, status: 0,
			wantCalls: []string{"kernel/net/netfilter/x_tables.ko", "kernel/net/netfilter/xt_u32.ko"},
			wantLog:   []string{"<6>modprobe xt_u32: loaded x_tables, xt_u32"},
		},
		{name: "built in", args: []string{"-q", "--", "sch_ingress"}, status: 0},
		{
			name: "nothing provides it, quietly", args: []string{"-q", "--", "netdev-eth9"}, status: 1,
			wantLog: []string{"<7>modprobe netdev-eth9: no module of this image provides it"},
		},
		{
			name: "nothing provides it, asked by a person", args: []string{"net-pf-38"}, status: 1,
			wantLog: []string{"<4>modprobe net-pf-38: no module of this image provides it"},
		},
		{
			name: "a load that fails names the module", args: []string{"-q", "--", "rtnl-link-ipip"}, fail: map[string]error{"tunnel4.ko": syscall.ENOEXEC}, status: 1,
			wantCalls: []string{"kernel/net/ipv4/ip_tunnel.ko", "kernel/net/ipv4/tunnel4.ko", "kernel/net/ipv4/ipip.ko"},
			wantLog:   []string{"<3>modprobe rtnl-link-ipip: load module kernel/net/ipv4/tunnel4.ko: exec format error"},
		},
		{name: "an option it does not know", args: []string{"-r", "ipip"}, status: 2},
		{name: "no name", args: []string{"-q", "--"}, status: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t, tc.loaded...)
			if tc.fail != nil {
				n.fail = tc.fail
			}
			if got := run(tc.args, n.system()); got != tc.status {
				t.Errorf("run(%q) = %d, want %d (stderr %q)", tc.args, got, tc.status, n.stderr.String())
			}
			if diff := cmp.Diff(tc.wantCalls, n.calls); diff != "" {
				t.Errorf("files loaded (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLog, n.log); diff != "" {
				t.Errorf("kernel log (-want +got):\n%s", diff)
			}
		})
	}
}

// Without the image's module index (a node booted without modules) every request fails, and says why.
func TestRunWithoutIndex(t *testing.T) {
	n := newFakeNode(t)
	n.dir = filepath.Join(n.dir, "missing")
	if got := run([]string{"-q", "--", "rtnl-link-ipip"}, n.system()); got != 1 {
		t.Errorf("run = %d, want 1", got)
	}
	if len(n.log) != 1 || !strings.Contains(n.log[0], "module index") {
		t.Errorf("kernel log = %q, want the index's error", n.log)
	}
}
