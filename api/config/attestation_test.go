package config

import (
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/pki"
)

func TestJoinAttestationConfig(t *testing.T) {
	g := generated(t)
	base := string(roundTrip(t, g.ControlPlane))
	with := func(block string) string {
		return strings.Replace(base, "\ncluster:\n", "\ncluster:\n  joinAttestation:\n"+block, 1)
	}
	ca, err := pki.NewCA("TPM maker", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	good := with("    required: true\n    pcrs:\n      15: " + strings.Repeat("ab", 32) + "\n    ekRoots:\n      - |\n" + indent(string(ca.Cert), "        "))
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(c); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if a := c.Cluster.JoinAttestation; !a.Required || len(a.PCRValues()[15]) != 32 || a.EKRootPool() == nil {
		t.Errorf("joinAttestation = %+v, want required with PCR 15 and a TPM maker", a)
	}
	for name, tc := range map[string]struct{ block, path string }{
		"a PCR a TPM lacks":            {"    pcrs:\n      30: " + strings.Repeat("ab", 32) + "\n", "cluster.joinAttestation.pcrs.30"},
		"not SHA-256":                  {"    pcrs:\n      4: abcd\n", "cluster.joinAttestation.pcrs.4"},
		"a maker's CA that is not PEM": {"    ekRoots:\n      - nope\n", "cluster.joinAttestation.ekRoots[0]"},
		"a maker's CA that is no CA":   {"    ekRoots:\n      - |\n" + indent(leafPEM(t), "        "), "cluster.joinAttestation.ekRoots[0]"},
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

// leafPEM is a certificate that is no CA's.
func leafPEM(t *testing.T) string {
	t.Helper()
	ca, err := pki.NewCA("ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := kp.Sign(pki.Request{CommonName: "leaf", Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return string(leaf.Cert)
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}
