//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// certsResp is `cairnctl certs check -o json`.
type certsResp struct {
	Certificates []struct {
		Name      string    `json:"name"`
		NotBefore time.Time `json:"not_before"`
		NotAfter  time.Time `json:"not_after"`
		RenewAt   time.Time `json:"renew_at"`
		CA        bool      `json:"ca"`
	} `json:"certificates"`
	Problems []string `json:"problems"`
}

// checkCerts runs `cairnctl certs check` (which fails on an expired, overdue or unreadable certificate)
// and checks that a fresh control plane's leaves are valid about a year and renew before they expire.
// It returns each certificate's start of validity, to tell a renewed one from the same one later.
func checkCerts(t *testing.T, mtls []string) map[string]time.Time {
	t.Helper()
	var r certsResp
	ctlJSON(t, &r, append(mtls, "certs", "check")...)
	t.Logf("cairnctl certs check:\n%s", mustCtl(t, time.Minute, append(mtls, "certs", "check")...))
	seen := map[string]time.Time{}
	for _, c := range r.Certificates {
		seen[c.Name] = c.NotBefore
		life := c.NotAfter.Sub(c.NotBefore)
		switch {
		case c.CA:
			if !c.RenewAt.IsZero() {
				t.Errorf("CA %s has a renewal date %s; a node never renews a CA", c.Name, c.RenewAt)
			}
		case life < 360*24*time.Hour || life > 367*24*time.Hour:
			t.Errorf("%s is valid %s, want about a year", c.Name, life)
		case !c.RenewAt.After(time.Now()) || !c.RenewAt.Before(c.NotAfter):
			t.Errorf("%s renews at %s, want between now and its expiry %s", c.Name, c.RenewAt, c.NotAfter)
		}
	}
	for _, want := range []string{"pki/ca.crt", "pki/apiserver.crt", "pki/etcd/server.crt", "admin.conf", "kubelet.conf"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("certs check lacks %s; it listed %v", want, seen)
		}
	}
	return seen
}

// checkClockMove shuts the control plane down and powers it on with its clock 300 days ahead: past the
// point where every one-year leaf certificate comes due (a third of its life left), as a node left off
// for most of a year. The node must renew them on its way to Running and be healthy. The renewed
// certificates are valid from the node's time, not yet at the host's, so the host's cairnctl verifies
// the node at its time (--clock-skew); kubectl has no such option, so the cluster's health is the
// node's own check (etcd, the API server, the control-plane pods, the Node Ready).
func checkClockMove(t *testing.T, c *cluster) {
	const ahead = 300 * 24 * time.Hour
	skewed := func() []string { return append(c.mtls(0), "--clock-skew", "300d") }
	pid := listCluster(t, c.Name).Nodes[0].PID
	mustCtl(t, time.Minute, append(c.mtls(0), "shutdown")...)
	waitExit(t, pid, 3*time.Minute)
	mustCtl(t, 10*time.Minute, "cluster", "start", "--name", c.Name, "--state-dir", stateDir, "--image-dir", imageDir,
		"--clock-offset", "300d")
	moved := time.Now().Add(ahead)
	waitStatus(t, skewed, restartTimeout, func(s statusResp) bool { return s.State == "Running" })
	t.Logf("cairnctl health 300 days on:\n%s", mustCtl(t, 10*time.Minute, append(skewed(), "health")...))
	// certs check fails on a certificate that has expired or is past its renewal date.
	var r certsResp
	ctlJSON(t, &r, append(skewed(), "certs", "check")...)
	renewed := 0
	for _, cert := range r.Certificates {
		switch {
		case cert.CA:
		case cert.NotBefore.Before(moved.Add(-2 * time.Hour)):
			t.Errorf("%s was not renewed: valid from %s, and the node's clock is about %s", cert.Name, cert.NotBefore, moved)
		default:
			renewed++
		}
	}
	if renewed == 0 {
		t.Errorf("certs check listed no renewed leaf certificate: %+v", r.Certificates)
	}
	t.Logf("%d leaf certificates renewed at the node's time", renewed)
}
