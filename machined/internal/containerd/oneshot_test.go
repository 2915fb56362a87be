package containerd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 5, ""},
		{"one\n", 5, "one"},
		{"a\nb\nc\nd\n", 2, "c | d"},
		{"{\"level\":\"info\"}\nError: snapshot file integrity check failed\n", 5, "{\"level\":\"info\"} | Error: snapshot file integrity check failed"},
	} {
		if got := lastLines(tc.in, tc.n); got != tc.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestBindsAtTheSamePaths(t *testing.T) {
	got := binds([]string{"/var/lib/cairn/state/etcd.snapshot", "/var/lib/etcd"})
	want := []specs.Mount{
		{Type: "bind", Source: "/var/lib/cairn/state/etcd.snapshot", Destination: "/var/lib/cairn/state/etcd.snapshot", Options: []string{"rbind", "rw"}},
		{Type: "bind", Source: "/var/lib/etcd", Destination: "/var/lib/etcd", Options: []string{"rbind", "rw"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("binds (-want +got):\n%s", diff)
	}
}
