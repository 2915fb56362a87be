package containerd

import (
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
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

func TestApplyImageConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string // the spec's, before
		config  ocispec.ImageConfig
		want    specs.Process
		wantErr string
	}{
		{
			name:   "entrypoint, command, environment, working directory",
			env:    []string{defaultPath},
			config: ocispec.ImageConfig{Entrypoint: []string{"/usr/local/bin/etcd"}, Cmd: []string{"--version"}, Env: []string{"PATH=/opt/bin", "ETCD_UNSUPPORTED_ARCH=amd64"}, WorkingDir: "/var/lib/etcd"},
			want:   specs.Process{Args: []string{"/usr/local/bin/etcd", "--version"}, Env: []string{defaultPath, "ETCD_UNSUPPORTED_ARCH=amd64"}, Cwd: "/var/lib/etcd"},
		},
		{
			name:   "no environment, no working directory",
			config: ocispec.ImageConfig{Cmd: []string{"/kubelet"}, User: "0:0"},
			want:   specs.Process{Args: []string{"/kubelet"}, Env: []string{defaultPath}, Cwd: "/"},
		},
		{
			name:    "another user is refused",
			config:  ocispec.ImageConfig{Cmd: []string{"/app"}, User: "nobody"},
			wantErr: `runs as user "nobody"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &oci.Spec{Process: &specs.Process{Env: tc.env}}
			err := applyImageConfig(s, tc.config)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("applyImageConfig = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *s.Process); diff != "" {
				t.Errorf("process (-want +got):\n%s", diff)
			}
		})
	}
}
