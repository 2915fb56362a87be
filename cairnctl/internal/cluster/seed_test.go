package cluster

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// A seed is what NoCloud's tooling writes: a vfat volume labelled CIDATA with user-data, meta-data and
// network-config (the node's L2 address by its MAC), readable by its owner alone (it holds the
// cluster's secrets).
func TestWriteSeed(t *testing.T) {
	for _, tool := range []string{"mkfs.vfat", "mcopy", "mdir", "mtype"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (dosfstools, mtools)", tool)
		}
	}
	path := filepath.Join(t.TempDir(), SeedFile)
	n := Node{Name: "w-1", MAC: "52:54:00:12:34:56", Address: netip.MustParseAddr("10.5.0.7")}
	if err := WriteSeed(t.Context(), path, []byte("kind: JoinConfig\n"), "w-1", seedNetworkConfig(n)); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mdir", "-i", path, "::").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Volume in drive : is CIDATA") {
		t.Errorf("mdir of the seed: %v\n%s\nwant a volume labelled CIDATA", err, out)
	}
	for name, want := range map[string]string{"user-data": "kind: JoinConfig\n", "meta-data": "local-hostname: w-1\n",
		"network-config": "macaddress: \"52:54:00:12:34:56\"\n    addresses: [10.5.0.7/24]"} {
		got, err := exec.Command("mtype", "-i", path, "::"+name).Output()
		if err != nil || !strings.Contains(string(got), want) {
			t.Errorf("%s on the seed = %q, %v; want it to hold %q", name, got, err, want)
		}
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("seed mode = %v, %v; want 0600", st.Mode(), err)
	}
}

// A local VM never asks a metadata service: QEMU's user network would take it to the host's, and a
// cluster made on a cloud machine would read that machine's user data. With a seed, it reads the seed;
// with its own metadata service (cluster add --userdata=ec2), that service.
func TestPlatformArg(t *testing.T) {
	seed := []qemu.Disk{{Serial: "cairn-state"}, {Serial: seedSerial, File: "/x/seed.img"}}
	for _, tc := range []struct {
		name     string
		disks    []qemu.Disk
		metadata bool
		cmdline  []string
		want     string
	}{
		{"no seed", seed[:1], false, nil, "cairn.platform=none"},
		{"a seed", seed, false, nil, "cairn.platform=nocloud"},
		{"its own metadata service", seed[:1], true, nil, "cairn.platform=ec2"},
		{"the operator's choice", seed, false, []string{"cairn.platform=ec2"}, "cairn.platform=ec2"},
		{"the operator's choice over the metadata service", seed[:1], true, []string{"cairn.platform=none"}, "cairn.platform=none"},
	} {
		if got := platformArg(tc.disks, tc.metadata, tc.cmdline); got != tc.want {
			t.Errorf("%s: platformArg = %q, want %q", tc.name, got, tc.want)
		}
	}
}
