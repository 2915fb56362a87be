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
