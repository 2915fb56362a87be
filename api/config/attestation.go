package config

import (
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
)

// JoinAttestation is what a cluster's join services ask of a joining node's TPM (issue 18's attested
// join). A node with a TPM always attests (its join client sends a quote when the service asks for one);
// these settings say what the service then requires.
type JoinAttestation struct {
	// Required refuses nodes that do not attest: no TPM, or a TPM that cannot quote. Without it they
	// join as before, and the service's event says they did not attest.
	Required bool `yaml:"required,omitempty" json:"required,omitempty"`
	// PCRs are SHA-256 PCR values (hex) the node's quote must carry, by PCR index (0 to 23): the boot
	// chain a cluster admits. Empty: the quote must be genuine and fresh, whatever the PCRs hold.
	PCRs map[int]string `yaml:"pcrs,omitempty" json:"pcrs,omitempty"`
	// EKRoots are the CA certificates (PEM) of the TPM makers the cluster trusts: a node attests only
	// with a TPM whose endorsement key's certificate, which the maker wrote into the TPM, chains to one
	// of them (intermediate CAs may be listed too). Empty: any TPM that passes the other checks.
	EKRoots []string `yaml:"ekRoots,omitempty" json:"ekRoots,omitempty"`
}

// EKRootPool is EKRoots as a pool (validated); nil when there are none.
func (a *JoinAttestation) EKRootPool() *x509.CertPool {
	if len(a.EKRoots) == 0 {
		return nil
	}
	pool := x509.NewCertPool()
	for _, r := range a.EKRoots {
		pool.AppendCertsFromPEM([]byte(r))
	}
	return pool
}

// PCRValues decodes PCRs (validated).
func (a *JoinAttestation) PCRValues() map[int][]byte {
	out := map[int][]byte{}
	for i, v := range a.PCRs {
		out[i], _ = hex.DecodeString(v)
	}
	return out
}

func validateJoinAttestation(a *JoinAttestation, e *Errors) {
	for i, r := range a.EKRoots {
		path := fmt.Sprintf("cluster.joinAttestation.ekRoots[%d]", i)
		if block, _ := pem.Decode([]byte(r)); block == nil || block.Type != "CERTIFICATE" {
			e.add(path, "must be a PEM certificate")
		} else if c, err := x509.ParseCertificate(block.Bytes); err != nil {
			e.add(path, "not a certificate: %v", err)
		} else if !c.IsCA {
			e.add(path, "must be a CA certificate (a TPM maker's)")
		}
	}
	for _, i := range slices.Sorted(maps.Keys(a.PCRs)) {
		path := fmt.Sprintf("cluster.joinAttestation.pcrs.%d", i)
		if i < 0 || i > 23 {
			e.add(path, "a TPM has PCRs 0 to 23")
		}
		if b, err := hex.DecodeString(a.PCRs[i]); err != nil || len(b) != 32 {
			e.add(path, "must be a SHA-256 value, 64 hex digits")
		}
	}
}
