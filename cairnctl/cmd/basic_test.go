package cmd

import (
	"os"
	"path/filepath"
	"strings"
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

// version asks the nodes whenever another command would: a cairnconfig in $CAIRNCONFIG counts as much
// as one given with --cairnconfig (make run's instructions export it).
func TestNamesNodes(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "config")
	if err := os.WriteFile(existing, []byte("context: dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		g    globals
		env  string
		want bool
	}{
		{"nothing", globals{}, filepath.Join(dir, "missing"), false},
		{"--nodes", globals{nodes: []string{"10.5.0.2"}}, filepath.Join(dir, "missing"), true},
		{"--token", globals{token: "abc"}, filepath.Join(dir, "missing"), true},
		{"--cairnconfig", globals{cairnconfig: existing}, filepath.Join(dir, "missing"), true},
		{"$CAIRNCONFIG", globals{}, existing, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CAIRNCONFIG", tc.env)
			if got := tc.g.namesNodes(); got != tc.want {
				t.Errorf("namesNodes() = %v, want %v", got, tc.want)
			}
		})
	}
}

// A group refuses a subcommand it does not have (exit 1, with a suggestion, without its help) and prints
// its help when named alone (exit 0).
func TestUnknownSubcommand(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"etcd", "membrs"}, 1, `unknown command "membrs" for "cairnctl etcd"; did you mean members?`},
		{[]string{"tpm", "status"}, 1, `unknown command "status" for "cairnctl tpm"`},
		{[]string{"tpm", "status", "--help"}, 1, `unknown command "status" for "cairnctl tpm"`},
		{[]string{"tpm"}, 0, "Available Commands:"},
	} {
		var out, errOut strings.Builder
		code := run(tc.args, &out, &errOut)
		all := out.String() + errOut.String()
		if code != tc.wantCode || !strings.Contains(all, tc.want) || (code != 0 && strings.Contains(all, "Usage:")) {
			t.Errorf("cairnctl %s = exit %d, %q %q; want exit %d and %q", strings.Join(tc.args, " "), code, out.String(), errOut.String(), tc.wantCode, tc.want)
		}
	}
}
