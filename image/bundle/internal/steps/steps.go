// Package steps lists the commands that build every binary of the bundle.
// It only describes them (pure, golden-tested); cmd/bundle runs them.
package steps

import (
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

// Step is one `go build` or `go install` run.
type Step struct {
	Name string
	// Dir is where the command runs. `go install pkg@version` must run
	// outside our modules so their go.mod cannot change what it resolves.
	Dir  string
	Env  []string // added to the environment
	Args []string // the command line, starting with "go"
	// Outputs are the files the step writes, relative to the output dir.
	Outputs []string
}

// Paths tells the plan where things are.
type Paths struct {
	Src     string // image/bundle
	Out     string // _out/bundle
	Neutral string // an empty directory outside every module
}

// Inputs that are not in versions.env.
type Inputs struct {
	// KubeBuildDate is the release time of k8s.io/kubernetes as the module
	// proxy reports it: a real date that never changes between builds.
	KubeBuildDate string
}

// Static, stripped, no local paths in the binary: the same sources give the
// same bytes on any machine with the same toolchain.
var common = []string{"-trimpath"}

const strip = "-s -w"

// Plan returns the steps in the order they should run.
func Plan(v versions.Versions, p Paths, in Inputs) []Step {
	bin := filepath.Join(p.Out, "bin")
	cni := filepath.Join(p.Out, "cni")
	pureGo := []string{"CGO_ENABLED=0"}

	containerdPkg := "github.com/containerd/containerd/v2"
	cniPkg := "github.com/containernetworking/plugins"
	return []Step{
		{
			Name: "kube", Dir: filepath.Join(p.Src, "kube"), Env: pureGo,
			Args:    goBuild(strip+" "+kubeVersionFlags(v, in), filepath.Join(bin, "kube"), "."),
			Outputs: []string{"bin/kube"},
		},
		{
			Name: "etcd", Dir: filepath.Join(p.Src, "etcd"), Env: pureGo,
			Args:    goBuild(strip, filepath.Join(bin, "etcd"), "."),
			Outputs: []string{"bin/etcd"},
		},
		{
			Name: "pause", Dir: p.Src, Env: pureGo,
			Args:    goBuild(strip, filepath.Join(bin, "pause"), "./pause"),
			Outputs: []string{"bin/pause"},
		},
		{
			Name: "cairn-echo", Dir: p.Src, Env: pureGo,
			Args:    goBuild(strip, filepath.Join(bin, "cairn-echo"), "./echo"),
			Outputs: []string{"bin/cairn-echo"},
		},
		{
			Name: "cairn-mount", Dir: p.Src, Env: pureGo,
			Args:    goBuild(strip, filepath.Join(bin, "cairn-mount"), "./mount"),
			Outputs: []string{"bin/cairn-mount"},
		},
		{
			Name: "containerd", Dir: p.Neutral, Env: append([]string{"GOBIN=" + bin}, pureGo...),
			Args: goInstall(strip+
				" -X "+containerdPkg+"/version.Version="+v.Containerd+
				" -X "+containerdPkg+"/version.Package="+containerdPkg,
				nil,
				containerdPkg+"/cmd/containerd@"+v.Containerd,
				containerdPkg+"/cmd/containerd-shim-runc-v2@"+v.Containerd,
				containerdPkg+"/cmd/ctr@"+v.Containerd),
			Outputs: []string{"bin/containerd", "bin/containerd-shim-runc-v2", "bin/ctr"},
		},
		{
			// runc needs cgo for libseccomp; linked as a static PIE like
			// upstream's `make static`, so it runs on a root with no libc.
			Name: "runc", Dir: p.Neutral, Env: []string{"GOBIN=" + bin, "CGO_ENABLED=1"},
			Args: goInstall(strip+" -linkmode external -extldflags -static-pie",
				[]string{"-buildmode=pie", "-tags", "seccomp urfave_cli_no_docs netgo osusergo"},
				"github.com/opencontainers/runc@"+v.Runc),
			Outputs: []string{"bin/runc"},
		},
		{
			Name: "cni", Dir: p.Neutral, Env: append([]string{"GOBIN=" + cni}, pureGo...),
			Args: goInstall(strip+" -X "+cniPkg+"/pkg/utils/buildversion.BuildVersion="+v.CNIPlugins,
				nil,
				cniPkg+"/plugins/main/bridge@"+v.CNIPlugins,
				cniPkg+"/plugins/ipam/host-local@"+v.CNIPlugins,
				cniPkg+"/plugins/main/loopback@"+v.CNIPlugins,
				cniPkg+"/plugins/meta/portmap@"+v.CNIPlugins),
			Outputs: []string{"cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap"},
		},
	}
}

func goBuild(ldflags, out, pkg string) []string {
	args := append([]string{"go", "build"}, common...)
	return append(args, "-ldflags", ldflags, "-o", out, pkg)
}

func goInstall(ldflags string, extra []string, pkgs ...string) []string {
	args := append([]string{"go", "install"}, common...)
	args = append(args, extra...)
	args = append(args, "-ldflags", ldflags)
	return append(args, pkgs...)
}

// kubeVersionFlags fill the version variables upstream's build scripts set
// from git; without them every component reports v0.0.0-master. There is no
// git checkout here, so gitCommit stays empty rather than made up.
func kubeVersionFlags(v versions.Versions, in Inputs) string {
	major, minor := v.KubeMajorMinor()
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, kv := range [][2]string{
			{"gitVersion", v.Kubernetes},
			{"gitMajor", major},
			{"gitMinor", minor},
			{"gitTreeState", "clean"},
			{"buildDate", in.KubeBuildDate},
			{"gitCommit", ""},
		} {
			flags = append(flags, "-X "+pkg+"."+kv[0]+"="+kv[1])
		}
	}
	return strings.Join(flags, " ")
}
