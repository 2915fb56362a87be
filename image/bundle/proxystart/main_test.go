package main

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

func TestEnviron(t *testing.T) {
	// /usr/sbin holds iptables (the netfilter tools layer); /usr/local/bin the kube binary.
	isFile := func(p string) bool { return p == "/usr/sbin/iptables" || p == "/usr/sbin/ip6tables" }
	env := []string{"HOME=/root", "PATH=/usr/local/bin:/usr/sbin:/usr/bin", "NODE_NAME=cp-1"}
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
			"/usr/local/bin:/usr/sbin:/usr/bin", "ip nat KUBE-SERVICES, ip6 mangle KUBE-PROXY-CANARY"},
		{"nft fails", nil, errors.New("exit status 1"),
			"/usr/local/bin:/usr/sbin:/usr/bin", "cannot list"},
		{"nft says nonsense", []byte("{"), nil,
			"/usr/local/bin:/usr/sbin:/usr/bin", "cannot read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, note := environ(env, tt.chains, tt.listErr, isFile)
			want := []string{"HOME=/root", "NODE_NAME=cp-1", "PATH=" + tt.wantPath}
			if tt.wantPath == "/usr/local/bin:/usr/sbin:/usr/bin" {
				want = env // untouched, order and all
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("environ() (-want +got):\n%s", diff)
			}
			if !strings.Contains(note, tt.wantNote) {
				t.Errorf("environ() note = %q, want it to say %q", note, tt.wantNote)
			}
		})
	}
}
