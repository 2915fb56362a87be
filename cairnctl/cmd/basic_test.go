package cmd

import (
	"testing"

	"github.com/cairn-os/cairn/api/machine"
)

// status's TPM line says whether the lock is measured and agrees, and whether STATE is encrypted.
func TestTPMLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		tpm  *machine.TPMStatus
		want []string
		not  []string
	}{
		{"sandbox", nil, nil, []string{"TPM"}},
		{"no TPM", &machine.TPMStatus{}, []string{"none"}, []string{"encrypted"}},
		{"measured", &machine.TPMStatus{Present: true, Measured: true, Agrees: true, Pcr: 15}, []string{"PCR 15", "agrees"}, []string{"encrypted"}},
		{"measured, encrypted", &machine.TPMStatus{Present: true, Measured: true, Agrees: true, Pcr: 15, StateEncrypted: true},
			[]string{"agrees", "STATE encrypted"}, nil},
		{"disagrees", &machine.TPMStatus{Present: true, Measured: true, Pcr: 15, Error: "replay differs"}, []string{"DISAGREES", "replay differs"}, nil},
	} {
		checkText(t, tc.name+": tpmLine", tpmLine(tc.tpm), tc.want, tc.not)
	}
}
