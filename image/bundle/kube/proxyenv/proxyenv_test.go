package proxyenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The testdata files are `nft -j list chains` (nftables 1.0.6) in a fresh
// network namespace: empty; after iptables-mode kube-proxy chains
// (KUBE-SERVICES with a jump to it, KUBE-PROXY-CANARY in ip6 mangle) beside
// flannel's; and with nftables mode's own table beside flannel's chains.
func readChains(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLeftovers(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"empty.json", nil},
		{"nftables-mode.json", nil},
		{"iptables-mode.json", []string{"ip nat KUBE-SERVICES", "ip6 mangle KUBE-PROXY-CANARY"}},
	}
	for _, tt := range tests {
		got, err := leftovers(readChains(t, tt.file))
		if err != nil {
			t.Fatalf("leftovers(%s) = %v", tt.file, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("leftovers(%s) (-want +got):\n%s", tt.file, diff)
		}
	}
	for _, bad := range []string{"", "{}", "not json"} {
		if _, err := leftovers([]byte(bad)); err == nil {
			t.Errorf("leftovers(%q) = nil error, want one", bad)
		}
	}
}

func TestSearchPath(t *testing.T) {
	// /usr/sbin holds iptables (the netfilter tools layer); /usr/local/bin the kube binary.
	isFile := func(p string) bool { return p == "/usr/sbin/iptables" || p == "/usr/sbin/ip6tables" }
	const path = "/usr/local/bin:/usr/sbin:/usr/bin"
	tests := []struct {
		name     string
		chains   []byte
		listErr  error
		wantPath string
		wantNote string
	}{
		{"fresh node", readChains(t, "empty.json"), nil,
			NFTOnlyDir + ":/usr/local/bin:/usr/bin", "without its iptables clean-up"},
		{"nftables mode ran before", readChains(t, "nftables-mode.json"), nil,
			NFTOnlyDir + ":/usr/local/bin:/usr/bin", "without its iptables clean-up"},
		{"iptables mode ran before", readChains(t, "iptables-mode.json"), nil,
			path, "ip nat KUBE-SERVICES, ip6 mangle KUBE-PROXY-CANARY"},
		{"nft fails", nil, errors.New("exit status 1"), path, "cannot list"},
		{"nft says nonsense", []byte("{"), nil, path, "cannot read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, note := searchPath(path, tt.chains, tt.listErr, isFile)
			if got != tt.wantPath {
				t.Errorf("searchPath() = %q, want %q", got, tt.wantPath)
			}
			if !strings.Contains(note, tt.wantNote) {
				t.Errorf("searchPath() note = %q, want it to say %q", note, tt.wantNote)
			}
		})
	}
}

// Prepare leaves kube-proxy's PATH alone unless the DaemonSet asks for
// nftables mode, and when nft cannot be run says so and still leaves it.
func TestPrepare(t *testing.T) {
	dir := t.TempDir() // no nft in it
	tests := []struct {
		mode     string
		wantNote string
	}{
		{"", ""},
		{"iptables", ""},
		{"nftables", Note + "cannot list the node's nftables chains"},
	}
	for _, tt := range tests {
		t.Setenv(ModeEnv, tt.mode)
		t.Setenv("PATH", dir)
		var out strings.Builder
		Prepare(&out)
		if got := os.Getenv("PATH"); got != dir {
			t.Errorf("mode %q: PATH = %q, want %q", tt.mode, got, dir)
		}
		if tt.wantNote == "" && out.Len() > 0 || !strings.HasPrefix(out.String(), tt.wantNote) {
			t.Errorf("mode %q: printed %q, want %q", tt.mode, out.String(), tt.wantNote)
		}
	}
}
