package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParse: any bytes as a machine config (an Init's, an apply's, or user data): Parse and Validate
// never panic, and a config they accept comes back the same through Marshal and Parse, so what the node
// stores is what it was given.
func FuzzParse(f *testing.F) {
	g, err := Generate(GenOptions{ClusterName: "demo", Endpoint: "https://10.5.0.2:6443", Now: time.Unix(1_800_000_000, 0)}, nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range []*MachineConfig{g.ControlPlane, g.Worker} {
		b, err := Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("apiVersion: cairn.dev/v1alpha1\nkind: MachineConfig\nmachine:\n  tpye: worker\n"))
	f.Add([]byte("a: &x [*x, *x]\nb: [*x, *x]\n"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseSecrets(data)
		c, err := Parse(data)
		if err != nil || Validate(c) != nil {
			return
		}
		out, err := Marshal(c)
		if err != nil {
			t.Fatalf("Marshal of a valid config: %v", err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(config)) = %v; marshalled:\n%s", err, out)
		}
		if d := cmp.Diff(c, back, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("Parse(Marshal(config)) differs (-parsed +again):\n%s", d)
		}
	})
}
