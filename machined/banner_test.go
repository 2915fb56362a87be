package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/machined/internal/node"
)

func TestListenPort(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want int
	}{
		{":50000", 50000},
		{"10.232.0.2:50100", 50100},
		{"[fd00::2]:50101", 50101},
		{":0", 7},
		{"nonsense", 7},
	} {
		if got := listenPort(tc.addr, 7); got != tc.want {
			t.Errorf("listenPort(%q, 7) = %d, want %d", tc.addr, got, tc.want)
		}
	}
}

// The console banner names the port the machine API listens on, and the command it suggests reaches it.
func TestBannerPort(t *testing.T) {
	st := node.Status{Hostname: "n1", State: "Boot", Addresses: []string{"10.5.0.2"}}
	for _, tc := range []struct {
		port       int
		wantPort   string
		wantTarget string
	}{
		{50000, "machine API on port 50000", "--nodes 10.5.0.2 "},
		{50100, "machine API on port 50100", "--nodes 10.5.0.2:50100 "},
	} {
		var b bytes.Buffer
		banner(&b, st, tc.port, "ab:cd", "tok", false, "")
		for _, want := range []string{tc.wantPort, tc.wantTarget} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("banner on port %d = %q, want it to contain %q", tc.port, b.String(), want)
			}
		}
	}
}

// A node that cannot read its lock (its encrypted STATE stays shut) says why on the console.
func TestBannerStuck(t *testing.T) {
	var b bytes.Buffer
	banner(&b, node.Status{Hostname: "n1", State: "Boot"}, 50000, "ab:cd", "tok", false, "mount STATE from /dev/vdb: the TPM refuses")
	if !strings.Contains(b.String(), "CANNOT READ ITS LOCK") || !strings.Contains(b.String(), "the TPM refuses") {
		t.Errorf("banner = %q, want the reason the lock cannot be read", b.String())
	}
}
