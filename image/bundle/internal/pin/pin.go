// Package pin renders the go.mod files of the wrapper modules (kube/, etcd/, flannel/, containerd/)
// from versions.env and checks that the committed ones still match it, so the
// versions live in one place while each wrapper keeps a committed go.sum.
package pin

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

const (
	// KubeModule, EtcdModule and ContainerdModule are the wrapper modules'
	// paths.
	KubeModule       = "github.com/cairn-os/cairn/image/bundle/kube"
	EtcdModule       = "github.com/cairn-os/cairn/image/bundle/etcd"
	ContainerdModule = "github.com/cairn-os/cairn/image/bundle/containerd"
	// Flanneld is the kube wrapper's package that runs flannel's packages
	// as flanneld, in the kube binary.
	Flanneld = KubeModule + "/flanneld"

	// Kubernetes is the module of the Kubernetes components.
	Kubernetes = "k8s.io/kubernetes"
	etcdServer = "go.etcd.io/etcd/server/v3"
	// etcdutl is etcd's offline tool, built into the etcd binary (etcd/main.go).
	etcdutl = "go.etcd.io/etcd/etcdutl/v3"
	// CoreDNS is CoreDNS's module, built into the kube binary.
	CoreDNS = "github.com/coredns/coredns"
	// Flannel is the flannel module, whose packages are built into the kube
	// binary (kube/flanneld).
	Flannel = "github.com/flannel-io/flannel"
	// Containerd is containerd's module; ContainerdDaemon, Shim and Ctr are
	// its commands: the daemon, its runc shim and the ctr client.
	Containerd       = "github.com/containerd/containerd/v2"
	ContainerdDaemon = Containerd + "/cmd/containerd"
	Shim             = Containerd + "/cmd/containerd-shim-runc-v2"
	Ctr              = Containerd + "/cmd/ctr"
	// conntrack is the module the kube wrapper replaces by its stand-in
	// (kube/conntrack): the original links golang.org/x/net/trace, and with
	// it Go's linker keeps every exported method in the binary.
	conntrack = "github.com/mwitkow/go-conntrack"
	// goVersion matches the root module, so every module of the repository
	// builds with the same toolchain.
	goVersion = "1.26.8"
)

// StagingModules lists the k8s.io modules that k8s.io/kubernetes' go.mod
// replaces with its ./staging tree. Outside that repository they must come
// from their published v0.MINOR.PATCH versions instead.
func StagingModules(k8sGoMod []byte) ([]string, error) {
	f, err := modfile.Parse("k8s.io/kubernetes/go.mod", k8sGoMod, nil)
	if err != nil {
		return nil, fmt.Errorf("parse k8s.io/kubernetes go.mod: %w", err)
	}
	var mods []string
	for _, r := range f.Replace {
		if strings.HasPrefix(r.New.Path, "./staging/") {
			mods = append(mods, r.Old.Path)
		}
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("k8s.io/kubernetes go.mod: no replace => ./staging lines found")
	}
	sort.Strings(mods)
	return mods, nil
}

// RenderKube returns the kube wrapper's go.mod before `go mod tidy`: it
// requires k8s.io/kubernetes, CoreDNS and flannel (built into the same binary),
// replaces every staging module by its published version and go-conntrack
// by Cairn's stand-in, and copies upstream's godebug lines so the runtime
// defaults match an official build.
// After tidy, PinKubernetes adds the versions CoreDNS and flannel must not
// raise.
func RenderKube(k8sGoMod []byte, v versions.Versions) ([]byte, error) {
	staging, err := StagingModules(k8sGoMod)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse("k8s.io/kubernetes/go.mod", k8sGoMod, nil)
	if err != nil {
		return nil, fmt.Errorf("parse k8s.io/kubernetes go.mod: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "module %s\n\ngo %s\n\n", KubeModule, goVersion)
	for _, g := range f.Godebug {
		fmt.Fprintf(&b, "godebug %s=%s\n", g.Key, g.Value)
	}
	if len(f.Godebug) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "require (\n\t%s %s\n\t%s %s\n\t%s %s\n)\n\n", CoreDNS, v.CoreDNS, Flannel, v.Flannel, Kubernetes, v.Kubernetes)
	b.WriteString("// The staging modules at the version published with this release.\nreplace (\n")
	for _, m := range staging {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, v.StagingVersion())
	}
	b.WriteString(")\n\n")
	fmt.Fprintf(&b, `// CoreDNS's metrics plugin links go-conntrack (through prometheus/common),
// and go-conntrack golang.org/x/net/trace, whose html/template makes the
// linker keep every exported method of every type in kube: a stand-in of
// the dial options prometheus/common uses takes its place (conntrack/go.mod).
replace %s => ./conntrack
`, conntrack)
	return b.Bytes(), nil
}

// pinComment heads the block PinKubernetes writes.
const pinComment = "// Kubernetes' own versions of the modules its components link that CoreDNS\n" +
	"// or flannel requires newer: the components build with exactly the\n" +
	"// dependencies their release was tested with (written by `bundle pin`)."

// PinKubernetes returns goMod (the tidied kube wrapper) with a replace for
// every module the Kubernetes components link (linked: modules of the
// packages they import, CoreDNS's and flanneld's left out) whose selected
// version is newer than the one k8s.io/kubernetes requires: only CoreDNS or
// flannel, the other requirements, can have raised it, and Kubernetes must
// keep what it was released with. A module only CoreDNS or flannel links
// keeps its version, even when k8s.io/kubernetes requires an older one for a
// command the binary does not hold (kubeadm's CoreDNS libraries). selected maps each module of
// the build list (`go list -m all`) to its version before replacement.
// Modules the wrapper already replaces (the staging modules) are left alone.
// It also returns how many modules it pinned.
func PinKubernetes(goMod, k8sGoMod []byte, selected map[string]string, linked map[string]bool) ([]byte, int, error) {
	k8s, err := modfile.Parse("k8s.io/kubernetes/go.mod", k8sGoMod, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("parse k8s.io/kubernetes go.mod: %w", err)
	}
	f, err := modfile.Parse("kube/go.mod", goMod, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("parse kube/go.mod: %w", err)
	}
	replaced := map[string]bool{}
	for _, r := range f.Replace {
		replaced[r.Old.Path] = true
	}
	var pins []string
	for _, r := range k8s.Require {
		m := r.Mod
		sel, ok := selected[m.Path]
		if !ok || !linked[m.Path] || replaced[m.Path] || semver.Compare(sel, m.Version) <= 0 {
			continue
		}
		pins = append(pins, fmt.Sprintf("\t%s => %s %s // raised to %s\n", m.Path, m.Path, m.Version, sel))
	}
	out := bytes.TrimRight(goMod, "\n")
	if len(pins) == 0 {
		return append(out, '\n'), 0, nil
	}
	sort.Strings(pins)
	out = fmt.Appendf(out, "\n\n%s\nreplace (\n%s)\n", pinComment, strings.Join(pins, ""))
	return out, len(pins), nil
}

// RenderEtcd returns the etcd wrapper's go.mod before `go mod tidy`.
func RenderEtcd(v versions.Versions) []byte {
	return fmt.Appendf(nil, "module %s\n\ngo %s\n\nrequire (\n\t%s %s\n\t%s %s\n)\n", EtcdModule, goVersion, etcdutl, v.Etcd, etcdServer, v.Etcd)
}

// CheckKube reports whether a committed kube/go.mod pins what versions.env
// says: Kubernetes, its staging modules, CoreDNS and flannel.
func CheckKube(goMod []byte, v versions.Versions) error {
	f, err := modfile.Parse("kube/go.mod", goMod, nil)
	if err != nil {
		return fmt.Errorf("parse kube/go.mod: %w", err)
	}
	if err := checkRequire(f, "kube/go.mod", Kubernetes, v.Kubernetes); err != nil {
		return err
	}
	if err := checkRequire(f, "kube/go.mod", CoreDNS, v.CoreDNS); err != nil {
		return err
	}
	if err := checkRequire(f, "kube/go.mod", Flannel, v.Flannel); err != nil {
		return err
	}
	for _, r := range f.Replace {
		// The staging modules; not the pins PinKubernetes may add (of
		// k8s.io/utils or klog, say).
		staging := strings.HasPrefix(r.Old.Path, "k8s.io/") && strings.HasPrefix(r.New.Version, "v0.") &&
			!module.IsPseudoVersion(r.New.Version)
		if staging && r.New.Version != v.StagingVersion() {
			return fmt.Errorf("kube/go.mod replaces %s with %s, want %s for Kubernetes %s",
				r.Old.Path, r.New.Version, v.StagingVersion(), v.Kubernetes)
		}
	}
	return checkStandIn(f, "kube/go.mod", conntrack, "./conntrack")
}

// CheckEtcd reports whether a committed etcd/go.mod pins what versions.env says.
func CheckEtcd(goMod []byte, v versions.Versions) error {
	f, err := modfile.Parse("etcd/go.mod", goMod, nil)
	if err != nil {
		return fmt.Errorf("parse etcd/go.mod: %w", err)
	}
	if err := checkRequire(f, "etcd/go.mod", etcdServer, v.Etcd); err != nil {
		return err
	}
	return checkRequire(f, "etcd/go.mod", etcdutl, v.Etcd)
}

// checkStandIn reports whether f replaces the module path by the stand-in
// in the wrapper's directory dir.
func checkStandIn(f *modfile.File, name, path, dir string) error {
	for _, r := range f.Replace {
		if r.Old.Path == path && r.New.Path == dir {
			return nil
		}
	}
	return fmt.Errorf("%s does not replace %s by %s", name, path, dir)
}

// RenderContainerd returns the containerd wrapper's go.mod before `go mod
// tidy`. Requiring containerd alone resolves every dependency to the
// version containerd's own go.mod selects, as `go install` of its commands
// would. The wrapper has no code of its own: the commands the bundle builds
// from containerd's packages are listed as tools, so that tidy keeps their
// dependencies and the bundle builds each from the same module graph.
func RenderContainerd(v versions.Versions) []byte {
	return fmt.Appendf(nil, `module %s

go %s

// Each built with `+"`go build IMPORT-PATH`"+`: the daemon and its runc shim
// (the node's), ctr (for tests, not the node).
tool (
	%s
	%s
	%s
)

require %s %s
`, ContainerdModule, goVersion, ContainerdDaemon, Shim, Ctr, Containerd, v.Containerd)
}

// CheckContainerd reports whether a committed containerd/go.mod pins what
// versions.env says.
func CheckContainerd(goMod []byte, v versions.Versions) error {
	f, err := modfile.Parse("containerd/go.mod", goMod, nil)
	if err != nil {
		return fmt.Errorf("parse containerd/go.mod: %w", err)
	}
	return checkRequire(f, "containerd/go.mod", Containerd, v.Containerd)
}

func checkRequire(f *modfile.File, name, mod, want string) error {
	for _, r := range f.Require {
		if r.Mod.Path == mod {
			if r.Mod.Version != want {
				return fmt.Errorf("%s requires %s %s but versions.env says %s", name, mod, r.Mod.Version, want)
			}
			return nil
		}
	}
	return fmt.Errorf("%s does not require %s", name, mod)
}
