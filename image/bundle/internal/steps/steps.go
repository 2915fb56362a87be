// Package steps lists the commands that build every binary of the bundle.
// It only describes them (pure, golden-tested); cmd/bundle runs them.
package steps

import (
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/image/bundle/internal/pin"
	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

// Step is one `go build`, `go install` or `go run` run.
type Step struct {
	Name string
	// Dir is where the command runs. `go install pkg@version` must run
	// outside our modules so their go.mod cannot change what it resolves.
	Dir  string
	Env  []string // added to the environment
	Args []string // the command line, starting with "go"
	// Outputs are the files the step writes, relative to the output dir.
	Outputs []string
	// Links are symlinks made once the command has run (each also an
	// Output): other names of a multi-call binary.
	Links []Link
}

// Link is a symlink at Name (relative to the output dir) pointing at Target.
type Link struct{ Name, Target string }

// Paths tells the plan where things are.
type Paths struct {
	Src     string // image/bundle
	Out     string // _out/bundle
	Neutral string // an empty directory outside every module
	// HostTools is where the netfilter tools are staged (empty or absent):
	// the tree the kube-proxy and flannel images get as one layer.
	HostTools string
}

// Root is the repository's root, where the root module (and so
// image/cmd/hosttools) lives.
func (p Paths) Root() string {
	return filepath.Join(p.Src, "..", "..")
}

// NetfilterTools are the host programs kube-proxy (nftables and iptables
// modes) and flannel (EnableNFTables or not) run, as in upstream's images:
// Debian's nft and iptables with the nf_tables backend. Their libraries, the
// loader, iptables' extensions and the iptables/ip6tables names come along
// (image/internal/rootfs.Tools).
var NetfilterTools = []string{"/usr/sbin/nft", "/usr/sbin/xtables-nft-multi"}

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

// containerdTags leave out the containerd plugins a node does not use (see
// the containerd step).
const containerdTags = "no_devmapper no_zfs no_tracing grpcnotrace nri_no_wasm"

// KubeTags build the kube binary: gRPC's grpcnotrace leaves
// golang.org/x/net/trace out of the components' gRPC (tracing is off unless
// grpc.EnableTracing is set, which nothing in kube does). That package's
// init serves its pages through html/template, whose lookup of methods by
// name makes Go's linker keep every exported method of every type in the
// binary (see kube/coredns.go for the rest of it).
const KubeTags = "grpcnotrace"

// Plan returns the steps in the order they should run.
func Plan(v versions.Versions, p Paths, in Inputs) []Step {
	bin := filepath.Join(p.Out, "bin")
	cni := filepath.Join(p.Out, "cni")
	pureGo := []string{"CGO_ENABLED=0"}

	containerdVersion := " -X " + pin.Containerd + "/version.Version=" + v.Containerd +
		" -X " + pin.Containerd + "/version.Package=" + pin.Containerd
	cniPkg := "github.com/containernetworking/plugins"
	return []Step{
		{
			// Kubernetes, CoreDNS and flanneld, with the build tag grpcnotrace
			// (KubeTags), which upstream's Kubernetes components are built
			// without: their gRPC tracing is never switched on. CoreDNS's
			// Makefile's one version flag, coremain.GitCommit, comes from git;
			// a module has no commit, so it stays unset rather than made up
			// (`coredns -version` still says CoreDNS-1.15.0). flanneld's
			// version is set as upstream's Makefile sets it.
			Name: "kube", Dir: filepath.Join(p.Src, "kube"), Env: pureGo,
			Args: goBuild(strip+" "+KubeVersionFlags(v, in)+" -X "+pin.Flannel+"/pkg/version.Version="+v.Flannel,
				[]string{"-tags", KubeTags}, filepath.Join(bin, "kube"), "."),
			Outputs: []string{"bin/kube"},
		},
		{
			// kubectl, for the host (tests, make run, conformance): no node
			// runs it, and in the multi-call binary every component ran its
			// package initialisation (see kube/main.go).
			Name: "kubectl", Dir: filepath.Join(p.Src, "kube"), Env: pureGo,
			Args:    goBuild(strip+" "+KubeVersionFlags(v, in), nil, filepath.Join(bin, "kubectl"), "./kubectl"),
			Outputs: []string{"bin/kubectl"},
		},
		{
			// etcd and, called by that name, etcdutl (see etcd/main.go).
			Name: "etcd", Dir: filepath.Join(p.Src, "etcd"), Env: pureGo,
			Args:    goBuild(strip, nil, filepath.Join(bin, "etcd"), "."),
			Links:   []Link{{"bin/etcdutl", "etcd"}},
			Outputs: []string{"bin/etcd", "bin/etcdutl"},
		},
		{
			Name: "pause", Dir: p.Src, Env: pureGo,
			Args:    goBuild(strip, nil, filepath.Join(bin, "pause"), "./pause"),
			Outputs: []string{"bin/pause"},
		},
		{
			Name: "cairn-mount", Dir: p.Src, Env: pureGo,
			Args:    goBuild(strip, nil, filepath.Join(bin, "cairn-mount"), "./mount"),
			Outputs: []string{"bin/cairn-mount"},
		},
		{
			// The daemon, upstream's cmd/containerd, built in the containerd/
			// wrapper, whose go.mod resolves what containerd's own go.mod
			// selects. The tags are containerd's own for leaving plugins out
			// (its cmd/containerd/builtins): the devmapper and ZFS snapshotters
			// and the OpenTelemetry exporters, which a node whose CRI uses
			// overlayfs and exports no traces never loads; grpcnotrace leaves
			// golang.org/x/net/trace out of its gRPC. 40.0 -> 38.6 MB, 9.87 ->
			// 9.52 MB xz. nri_no_wasm is NRI's own tag: it leaves out NRI's
			// WebAssembly plugins and so the wazero runtime they run in, which
			// a node never starts (machined's config disables NRI). 37.9 ->
			// 35.3 MB, 10.92 -> 10.17 MB with zstd -19.
			Name: "containerd", Dir: filepath.Join(p.Src, "containerd"), Env: pureGo,
			Args: goBuild(strip+containerdVersion, []string{"-tags", containerdTags},
				filepath.Join(bin, "containerd"), pin.ContainerdDaemon),
			Outputs: []string{"bin/containerd"},
		},
		{
			// The runc shim, one process per pod for the pod's whole life, is
			// its own binary, as upstream ships it: as a name of the daemon's
			// binary every shim ran the daemon's package initialisation at each
			// start and kept its heap (natively 421 package inits against 184,
			// 6.7 MiB private memory against 4.8, in a sandbox control plane of
			// nine shims) for 3.2 MiB more in the payload.
			Name: "containerd-shim-runc-v2", Dir: filepath.Join(p.Src, "containerd"), Env: pureGo,
			Args: goBuild(strip+containerdVersion, []string{"-tags", containerdTags},
				filepath.Join(bin, "containerd-shim-runc-v2"), pin.Shim),
			Outputs: []string{"bin/containerd-shim-runc-v2"},
		},
		{
			// ctr is for tests and debugging only; the node does not need it.
			Name: "ctr", Dir: filepath.Join(p.Src, "containerd"), Env: pureGo,
			Args:    goBuild(strip+containerdVersion, nil, filepath.Join(bin, "ctr"), pin.Ctr),
			Outputs: []string{"bin/ctr"},
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
			// The plugins of Cairn's own conflist (bridge, its host-local
			// IPAM, portmap for host ports). Not loopback: containerd sets a
			// pod's lo up itself (use_internal_loopback in machined's
			// containerd config), so no node ever runs it.
			Name: "cni", Dir: p.Neutral, Env: append([]string{"GOBIN=" + cni}, pureGo...),
			Args: goInstall(strip+" -X "+cniPkg+"/pkg/utils/buildversion.BuildVersion="+v.CNIPlugins,
				nil,
				cniPkg+"/plugins/main/bridge@"+v.CNIPlugins,
				cniPkg+"/plugins/ipam/host-local@"+v.CNIPlugins,
				cniPkg+"/plugins/meta/portmap@"+v.CNIPlugins),
			Outputs: []string{"cni/bridge", "cni/host-local", "cni/portmap"},
		},
		HostTools(p, "-out", p.HostTools),
	}
}

// HostTools runs image/cmd/hosttools on NetfilterTools in the root module,
// which resolves their libraries with the code that builds the root image.
// With "-out DIR" it stages the tree for the images; with "-digest" it prints
// a hash of the tree, which the stamp holds so that a Debian upgrade of nft,
// iptables or any of their libraries rebuilds the bundle.
func HostTools(p Paths, mode ...string) Step {
	args := append([]string{"go", "run", "./image/cmd/hosttools"}, mode...)
	args = append(append(args, "-host-root", "/"), NetfilterTools...)
	return Step{Name: "hosttools", Dir: p.Root(), Env: []string{"CGO_ENABLED=0"}, Args: args}
}

func goBuild(ldflags string, extra []string, out, pkg string) []string {
	args := append([]string{"go", "build"}, common...)
	args = append(args, extra...)
	return append(args, "-ldflags", ldflags, "-o", out, pkg)
}

func goInstall(ldflags string, extra []string, pkgs ...string) []string {
	args := append([]string{"go", "install"}, common...)
	args = append(args, extra...)
	args = append(args, "-ldflags", ldflags)
	return append(args, pkgs...)
}

// KubeVersionFlags fill the version variables upstream's build scripts set
// from git; without them every component reports v0.0.0-master. There is no
// git checkout here, so gitCommit stays empty rather than made up. The
// conformance suite's build sets them too.
func KubeVersionFlags(v versions.Versions, in Inputs) string {
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
