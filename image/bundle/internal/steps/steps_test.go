package steps

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

var update = flag.Bool("update", false, "rewrite golden files")

var v = versions.Versions{
	Kubernetes: "v1.37.2", Etcd: "v3.6.16", Containerd: "v2.4.2", Runc: "v1.3.6",
	CNIPlugins: "v1.9.1", CoreDNS: "v1.15.0", Flannel: "v0.28.10", PauseTag: "3.10.2",
}

var paths = Paths{Src: "/repo/image/bundle", Out: "/out", Neutral: "/tmp/n", HostTools: "/tmp/h"}

// The golden file is the reviewable record of every flag each binary is
// built with (static, stripped, version stamps).
func TestPlanGolden(t *testing.T) {
	plan := Plan(v, paths, Inputs{KubeBuildDate: "2026-10-27T12:01:04Z"})
	var b strings.Builder
	// The stamp's digest command comes first, as the build runs it.
	for _, s := range append([]Step{HostTools(paths, "-digest")}, plan...) {
		fmt.Fprintf(&b, "## %s\ndir: %s\nenv: %s\n", s.Name, s.Dir, strings.Join(s.Env, " "))
		for _, a := range s.Args {
			fmt.Fprintf(&b, "  %s\n", a)
		}
		fmt.Fprintf(&b, "outputs: %s\n", strings.Join(s.Outputs, " "))
		for _, l := range s.Links {
			fmt.Fprintf(&b, "link: %s -> %s\n", l.Name, l.Target)
		}
		b.WriteString("\n")
	}
	got := b.String()
	const path = "testdata/plan.golden"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Plan() mismatch (-want +got):\n%s", diff)
	}
}

func TestPlanInvariants(t *testing.T) {
	plan := Plan(v, paths, Inputs{KubeBuildDate: "2026-10-27T12:01:04Z"})
	seen := map[string]bool{}
	for _, s := range plan {
		args := strings.Join(s.Args, " ")
		if s.Name == "hosttools" {
			// Not a binary of the bundle: it stages host files for a layer.
			if s.Dir != "/repo" || !strings.HasPrefix(args, "go run ./image/cmd/hosttools -out /tmp/h ") || len(s.Outputs) != 0 {
				t.Errorf("hosttools step = %q in %s, outputs %v; want go run in the repository root staging into HostTools", args, s.Dir, s.Outputs)
			}
			continue
		}
		if !strings.Contains(args, "-trimpath") || !strings.Contains(args, "-s -w") {
			t.Errorf("step %s = %q, want -trimpath and -s -w (reproducible, stripped)", s.Name, args)
		}
		cgo := ""
		for _, e := range s.Env {
			if strings.HasPrefix(e, "CGO_ENABLED=") {
				cgo = e
			}
		}
		switch s.Name {
		case "runc":
			if cgo != "CGO_ENABLED=1" || !strings.Contains(args, "-static-pie") {
				t.Errorf("runc step = %q env %v, want cgo with -static-pie", args, s.Env)
			}
		case "flannel":
			if cgo != "CGO_ENABLED=1" || !strings.Contains(args, "-extldflags -static") || !strings.Contains(args, "netgo osusergo grpcnotrace") {
				t.Errorf("flannel step = %q env %v, want cgo linked -static with netgo osusergo grpcnotrace", args, s.Env)
			}
		default:
			if cgo != "CGO_ENABLED=0" {
				t.Errorf("step %s env = %v, want CGO_ENABLED=0 (static)", s.Name, s.Env)
			}
		}
		for _, o := range s.Outputs {
			if seen[o] {
				t.Errorf("output %s built twice", o)
			}
			seen[o] = true
		}
		for _, l := range s.Links {
			if !slices.Contains(s.Outputs, l.Name) || strings.Contains(l.Target, "/") || !slices.Contains(s.Outputs, "bin/"+l.Target) {
				t.Errorf("step %s link %s -> %s: want an output naming another output of the step in the same directory", s.Name, l.Name, l.Target)
			}
		}
	}
	kube := strings.Join(plan[0].Args, " ")
	for _, want := range []string{
		"k8s.io/component-base/version.gitVersion=v1.37.2",
		"k8s.io/client-go/pkg/version.gitVersion=v1.37.2",
		"k8s.io/component-base/version.gitMinor=37",
		"k8s.io/client-go/pkg/version.buildDate=2026-10-27T12:01:04Z",
	} {
		if !strings.Contains(kube, want) {
			t.Errorf("kube step = %q, want it to set %s", kube, want)
		}
	}
	if last := plan[len(plan)-1]; last.Name != "hosttools" {
		t.Errorf("last step = %s, want hosttools (the images need its tree)", last.Name)
	}
}
