package cmdline

import (
	"maps"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse: any kernel command line (the boot loader's, so anyone's at the console): Parse and
// ParseIP never panic, and on a line without quotes that Parse accepts, All holds each key=value's last
// value and the named fields agree with it.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"console=ttyS0 cairn.token=abc cairn.join=10.5.0.2:50001 cairn.jointoken=abcdef.0123456789abcdef",
		"ip=10.5.0.3::10.5.0.1:255.255.255.0:node:eth0:none ip=dhcp",
		"ip=10.5.0.3/24::10.5.0.1::node:eth0:off:10.5.0.1",
		`cairn.hostname="a b" quiet "x=y z"`,
		"cairn.token= cairn.token=second ==",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, err := Parse(line)
		for _, f := range strings.Fields(line) {
			_, _ = ParseIP(strings.TrimPrefix(f, "ip="))
		}
		if err != nil || strings.Contains(line, `"`) || !utf8.ValidString(line) {
			return
		}
		want := map[string]string{}
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }) {
			k, v, _ := strings.Cut(f, "=")
			want[k] = v
		}
		if !maps.Equal(p.All, want) {
			t.Fatalf("Parse(%q).All = %q, want %q", line, p.All, want)
		}
		for key, got := range map[string]string{"cairn.token": p.Token, "cairn.join": p.JoinAddr, "cairn.jointoken": p.JoinToken, "cairn.hostname": p.Hostname} {
			if got != want[key] {
				t.Fatalf("Parse(%q): %s = %q, want %q", line, key, got, want[key])
			}
		}
	})
}
