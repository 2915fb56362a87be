package versions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const good = `# comment
KUBERNETES_VERSION=v1.37.2
ETCD_VERSION = v3.6.16

CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.3.6
CNI_PLUGINS_VERSION=v1.9.1
COREDNS_VERSION=v1.15.0
FLANNEL_VERSION=v0.28.10
PAUSE_TAG=3.10.2
`

func TestParse(t *testing.T) {
	want := Versions{
		Kubernetes: "v1.37.2", Etcd: "v3.6.16", Containerd: "v2.4.2", Runc: "v1.3.6",
		CNIPlugins: "v1.9.1", CoreDNS: "v1.15.0", Flannel: "v0.28.10", PauseTag: "3.10.2",
	}
	got, err := Parse(strings.NewReader(good))
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(string) string
		wants []string
	}{
		{"bad semver", func(s string) string { return strings.Replace(s, "v1.37.2", "1.37", 1) },
			[]string{`KUBERNETES_VERSION="1.37" is not a vMAJOR.MINOR.PATCH version`}},
		{"missing key", func(s string) string { return strings.Replace(s, "RUNC_VERSION=v1.3.6\n", "", 1) },
			[]string{"missing RUNC_VERSION"}},
		{"unknown and duplicate, both reported", func(s string) string { return s + "FOO=1\nPAUSE_TAG=3.10.3\n" },
			[]string{"line 11: unknown key FOO", "line 12: PAUSE_TAG set twice"}},
		{"no equals", func(s string) string { return s + "garbage\n" },
			[]string{`line 11: want KEY=VALUE, got "garbage"`}},
		{"empty tag", func(s string) string { return strings.Replace(s, "PAUSE_TAG=3.10.2", "PAUSE_TAG=", 1) },
			[]string{"PAUSE_TAG is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.edit(good)))
			if err == nil {
				t.Fatalf("Parse() error = nil, want %q", tt.wants)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestDerived(t *testing.T) {
	v, err := Parse(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	major, minor := v.KubeMajorMinor()
	got := []string{major, minor, v.StagingVersion(), v.EtcdImageTag()}
	want := []string{"1", "37", "v0.37.2", "3.6.16-0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("derived versions mismatch (-want +got):\n%s", diff)
	}
}

// The committed versions.env must always parse: it is what `make bundle` reads.
func TestCommittedFile(t *testing.T) {
	path := filepath.Join("..", "..", "versions.env")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("versions.env missing: %v", err)
	}
	if _, err := Load(path); err != nil {
		t.Errorf("Load(%s) error = %v", path, err)
	}
}
