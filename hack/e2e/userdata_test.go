//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// platformStatus is the platform part of `cairnctl status -o json`.
type platformStatus struct {
	State     string   `json:"state"`
	LockedBy  string   `json:"locked_by"`
	Addresses []string `json:"addresses"`
	Hostname  string   `json:"hostname"`
	LastError string   `json:"last_error"`
	Platform  *struct {
		Searching bool     `json:"searching"`
		Source    string   `json:"source"`
		Tried     []string `json:"tried"`
		Action    string   `json:"action"`
		Error     string   `json:"error"`
	} `json:"platform"`
}

// writeSeed makes a NoCloud seed as a cloud's tooling does: vfat, labelled CIDATA, user-data and
// meta-data at its root.
func writeSeed(t *testing.T, userData, hostname string) string {
	t.Helper()
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.img")
	for name, data := range map[string]string{"user-data": userData, "meta-data": "local-hostname: " + hostname + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range [][]string{
		{"mkfs.vfat", "-n", "CIDATA", "-C", seed, "2048"},
		{"mcopy", "-i", seed, filepath.Join(dir, "user-data"), filepath.Join(dir, "meta-data"), "::"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return seed
}

// TestUserData is issue 19's user data from a NoCloud seed (a disk labelled CIDATA), the way a cloud
// image gets it. Always: user data that is not a Cairn document is refused, the node says why in
// status and stays in maintenance mode, and it takes the seed's hostname. With CAIRN_E2E_PLATFORMS=1
// (`make e2e-platforms`, minutes more under TCG), every VM booting cairn.raw: `cluster create
// --userdata` makes a control plane that inits itself from its seed, and `cluster add --userdata` a
// worker that joins by itself from a join document on its seed, its L2 address from the seed's
// network-config; both are Running, the worker is a Ready node under its seed's name. Then `cluster add
// --userdata=ec2` a worker that finds the same document behind an IMDSv2 metadata service at
// 169.254.169.254 (served by cairnctl through QEMU's guestfwd) and joins the same way.
func TestUserData(t *testing.T) {
	t.Run("malformed user data", func(t *testing.T) {
		seed := writeSeed(t, "#!/bin/sh\necho pwned\n", "seeded-1")
		c := createCluster(t, "ud-bad", bootTimeout, "--no-init", "--disk-file", "cidata="+seed)
		// A fresh value each time: the JSON leaves out what is false or empty.
		var st platformStatus
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Second) {
			st = platformStatus{}
			ctlJSON(t, &st, append(c.maint(t, 0), "status")...)
			if st.Platform != nil && !st.Platform.Searching || time.Now().After(deadline) {
				break
			}
		}
		if st.State != "Boot" || st.LockedBy != "" || st.Platform == nil || st.Platform.Source != "nocloud" ||
			!strings.Contains(st.Platform.Error, "not a Cairn document") || !strings.Contains(st.LastError, "user data from nocloud") {
			t.Errorf("status = %+v, platform %+v; want Boot, unlocked, nocloud's user data refused as not a Cairn document", st, st.Platform)
		}
		if strings.Contains(st.Platform.Error+st.LastError, "pwned") {
			t.Errorf("the status quotes the user data: %q", st.Platform.Error)
		}
		if st.Hostname != "seeded-1" {
			t.Errorf("hostname = %q, want the seed's local-hostname seeded-1", st.Hostname)
		}
		out := mustCtl(t, time.Minute, append(c.maint(t, 0), "status")...)
		if !strings.Contains(out, "user data NOT used") {
			t.Errorf("cairnctl status does not say the user data was not used:\n%s", out)
		}
		checkDestroy(t, c)
	})
	if os.Getenv("CAIRN_E2E_PLATFORMS") == "" {
		t.Log("skipping init and join from user data: run `make e2e-platforms` (CAIRN_E2E_PLATFORMS=1)")
		return
	}

	// From cairn.raw, as a cloud boots it (UEFI, the disk image as its boot disk): every node of the
	// cluster is made from it, and what each becomes is its user data.
	c := createCluster(t, "ud", createTimeout, "--userdata", "--mode", "raw")
	s := status(t, c.mtls(0))
	if s.State != "Running" || s.LockedBy != "init" {
		t.Fatalf("control plane from user data: status %+v, want Running, locked by init", s)
	}
	var st platformStatus
	ctlJSON(t, &st, append(c.mtls(0), "status")...)
	if st.Platform == nil || st.Platform.Source != "nocloud" || st.Platform.Action != "init" {
		t.Errorf("platform status = %+v, want nocloud's user data said init", st.Platform)
	}
	mustCtl(t, 10*time.Minute, append(c.mtls(0), "health")...)

	out := mustCtl(t, createTimeout, "cluster", "add", "--name", c.Name, "--state-dir", stateDir, "--image-dir", imageDir,
		"--userdata", "--boot-timeout", bootTimeout.String())
	t.Logf("cluster add --userdata:\n%s", out)
	c = &cluster{clusterInfo: listCluster(t, c.Name), cairnconfig: c.cairnconfig}
	if len(c.Nodes) != 2 {
		t.Fatalf("cluster has %d nodes after cluster add, want 2", len(c.Nodes))
	}
	w := c.Nodes[1]
	st = platformStatus{}
	ctlJSON(t, &st, append(c.mtls(1), "status")...)
	if st.State != "Running" || st.LockedBy != "join" || st.Hostname != w.Name || st.Platform == nil ||
		!strings.HasPrefix(st.Platform.Action, "join ") {
		t.Errorf("worker from user data: status %+v, platform %+v; want Running, locked by join, named %s from its seed", st, st.Platform, w.Name)
	}
	// Its L2 address came only from the seed's network-config (no ip= on its command line).
	if !slices.Contains(st.Addresses, w.Address) {
		t.Errorf("worker from user data has addresses %v, want its seed's network-config's %s", st.Addresses, w.Address)
	}
	waitNodeReady(t, filepath.Join(c.Dir, "kubeconfig"), w.Name)

	// The same join document from an EC2-style metadata service: QEMU forwards the guest's connections
	// to 169.254.169.254:80 to cairnctl's IMDSv2 server, one process per connection.
	out = mustCtl(t, createTimeout, "cluster", "add", "--name", c.Name, "--state-dir", stateDir, "--image-dir", imageDir,
		"--userdata=ec2", "--boot-timeout", bootTimeout.String())
	t.Logf("cluster add --userdata=ec2:\n%s", out)
	c = &cluster{clusterInfo: listCluster(t, c.Name), cairnconfig: c.cairnconfig}
	if len(c.Nodes) != 3 {
		t.Fatalf("cluster has %d nodes after the second cluster add, want 3", len(c.Nodes))
	}
	w = c.Nodes[2]
	st = platformStatus{}
	ctlJSON(t, &st, append(c.mtls(2), "status")...)
	if st.State != "Running" || st.LockedBy != "join" || st.Hostname != w.Name || st.Platform == nil ||
		st.Platform.Source != "ec2" || !strings.HasPrefix(st.Platform.Action, "join ") {
		t.Errorf("worker from IMDS user data: status %+v, platform %+v; want Running, locked by join, named %s by the metadata service", st, st.Platform, w.Name)
	}
	reqs, err := os.ReadFile(filepath.Join(c.Dir, "nodes", w.Name, "imds", "requests.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the metadata service's requests:\n%s", reqs)
	for _, want := range []string{"PUT /latest/api/token 200", "GET /latest/user-data 200", "GET /latest/meta-data/local-hostname 200"} {
		if !strings.Contains(string(reqs), want) {
			t.Errorf("the metadata service never answered %q: the node did not use IMDSv2", want)
		}
	}
	if strings.Contains(string(reqs), " 401") {
		t.Errorf("the node asked the metadata service without a session token (IMDSv1)")
	}
	waitNodeReady(t, filepath.Join(c.Dir, "kubeconfig"), w.Name)
	checkDestroy(t, c)
}
