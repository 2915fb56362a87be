package config

import (
	"encoding/hex"
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
