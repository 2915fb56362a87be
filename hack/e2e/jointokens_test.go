//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// checkJoinTokens makes a join token, finds it in the cluster's list, revokes it and finds it gone: the
// tokens are kept in the cluster (a Secret), which is what lets every control plane honour them.
func checkJoinTokens(t *testing.T, mtls []string) {
	t.Helper()
	var made struct {
		Token string `json:"token"`
	}
	ctlJSON(t, &made, append(mtls, "join-token", "create", "--ttl", "10m", "--uses", "2")...)
	id, _, ok := strings.Cut(made.Token, ".")
	if !ok {
		t.Fatalf("join-token create gave %q, want ID.SECRET", made.Token)
	}
	type list struct {
		Tokens []struct {
			ID       string    `json:"id"`
			Role     string    `json:"role"`
			Expires  time.Time `json:"expires"`
			UsesLeft uint32    `json:"uses_left"`
		} `json:"tokens"`
	}
	var l list
	ctlJSON(t, &l, append(mtls, "join-token", "list")...)
	found := false
	for _, tk := range l.Tokens {
		if tk.ID == id {
			found = true
			if tk.Role != "worker" || tk.UsesLeft != 2 || time.Until(tk.Expires) > 11*time.Minute {
				t.Errorf("join-token list shows %+v, want a worker token with 2 uses for 10 minutes", tk)
			}
		}
	}
	if !found {
		t.Fatalf("join-token list lacks the token %s just made: %+v", id, l.Tokens)
	}
	mustCtl(t, time.Minute, append(mtls, "join-token", "revoke", id)...)
	l = list{}
	ctlJSON(t, &l, append(mtls, "join-token", "list")...)
	for _, tk := range l.Tokens {
		if tk.ID == id {
			t.Errorf("join-token list still shows %s after revoke", id)
		}
	}
	if r := ctl(t, time.Minute, append(mtls, "join-token", "revoke", id)...); r.err == nil {
		t.Errorf("revoking %s twice succeeded; an unknown token must be an error", id)
	}
}
