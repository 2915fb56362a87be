package config

import (
	"strings"
	"testing"
)

func TestJoinAttestationConfig(t *testing.T) {
	g := generated(t)
	base := string(roundTrip(t, g.ControlPlane))
	with := func(block string) string {
		return strings.Replace(base, "\ncluster:\n", "\ncluster:\n  joinAttestation:\n"+block, 1)
	}
	good := with("    required: true\n    pcrs:\n      15: " + strings.Repeat("ab", 32) + "\n")
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(c); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if a := c.Cluster.JoinAttestation; !a.Required || len(a.PCRValues()[15]) != 32 {
		t.Errorf("joinAttestation = %+v, want required with PCR 15", a)
	}
	for name, tc := range map[string]struct{ block, path string }{
		"a PCR a TPM lacks": {"    pcrs:\n      30: " + strings.Repeat("ab", 32) + "\n", "cluster.joinAttestation.pcrs.30"},
		"not SHA-256":       {"    pcrs:\n      4: abcd\n", "cluster.joinAttestation.pcrs.4"},
	} {
		c, err := Parse([]byte(with(tc.block)))
		if err == nil {
			err = Validate(c)
		}
		if err == nil || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error = %v, want one naming %s", name, err, tc.path)
		}
	}
	if _, err := Parse([]byte(with("    requierd: true\n"))); err == nil || !strings.Contains(err.Error(), "requierd") {
		t.Errorf("a misspelt field: error = %v, want it named", err)
	}
}
