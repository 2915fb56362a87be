// Package pin renders the go.mod files of the wrapper modules (kube/, etcd/, coredns/, flannel/)
// from versions.env and checks that the committed ones still match it, so the
// versions live in one place while each wrapper keeps a committed go.sum.
package pin

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

const (
	// KubeModule, EtcdModule, CoreDNSModule and FlannelModule are the
	// wrapper modules' paths.
	KubeModule    = "github.com/cairn-os/cairn/image/bundle/kube"
	EtcdModule    = "github.com/cairn-os/cairn/image/bundle/etcd"
	CoreDNSModule = "github.com/cairn-os/cairn/image/bundle/coredns"
	FlannelModule = "github.com/cairn-os/cairn/image/bundle/flannel"

	kubernetes = "k8s.io/kubernetes"
	etcdServer = "go.etcd.io/etcd/server/v3"
	coreDNS    = "github.com/coredns/coredns"
	// Flannel is the flannel module, whose root package is flanneld.
	Flannel = "github.com/flannel-io/flannel"
	// tencentVPC is the SDK module flannel's tencent-vpc backend imports;
	// the module proxy does not serve it.
	tencentVPC = "github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc"
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
// requires k8s.io/kubernetes, replaces every staging module by its published
// version, and copies upstream's godebug lines so the runtime defaults match
// an official build.
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
	fmt.Fprintf(&b, "require %s %s\n\n", kubernetes, v.Kubernetes)
	b.WriteString("// The staging modules at the version published with this release.\nreplace (\n")
	for _, m := range staging {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, v.StagingVersion())
	}
	b.WriteString(")\n")
	return b.Bytes(), nil
}

// RenderEtcd returns the etcd wrapper's go.mod before `go mod tidy`.
func RenderEtcd(v versions.Versions) []byte {
	return fmt.Appendf(nil, "module %s\n\ngo %s\n\nrequire %s %s\n", EtcdModule, goVersion, etcdServer, v.Etcd)
}

// RenderCoreDNS returns the coredns wrapper's go.mod before `go mod tidy`.
// CoreDNS's own go.mod has no replace directives, so requiring it is enough
// to build with the dependency versions upstream tested.
func RenderCoreDNS(v versions.Versions) []byte {
	return fmt.Appendf(nil, "module %s\n\ngo %s\n\nrequire %s %s\n", CoreDNSModule, goVersion, coreDNS, v.CoreDNS)
}

// RenderFlannel returns the flannel wrapper's go.mod before `go mod tidy`.
// flanneld is the module's root package, a program, so the wrapper lists it
// as a tool (which keeps its dependencies in go.mod and go.sum) and the
// bundle builds it by import path. The replace is why the wrapper exists.
func RenderFlannel(v versions.Versions) []byte {
	return fmt.Appendf(nil, `module %s

go %s

// flanneld: built with `+"`go build %s`"+`.
tool %s

require %s %s

// The module proxy does not serve Tencent Cloud's VPC SDK, which flannel's
// tencent-vpc backend imports: a stand-in whose every call fails takes its
// place (Cairn uses the vxlan backend).
replace %s => ./tencentvpc
`, FlannelModule, goVersion, Flannel, Flannel, Flannel, v.Flannel, tencentVPC)
}

// CheckKube reports whether a committed kube/go.mod pins what versions.env says.
func CheckKube(goMod []byte, v versions.Versions) error {
	f, err := modfile.Parse("kube/go.mod", goMod, nil)
	if err != nil {
		return fmt.Errorf("parse kube/go.mod: %w", err)
	}
	if err := checkRequire(f, "kube/go.mod", kubernetes, v.Kubernetes); err != nil {
		return err
	}
	for _, r := range f.Replace {
		if strings.HasPrefix(r.Old.Path, "k8s.io/") && r.New.Version != v.StagingVersion() {
			return fmt.Errorf("kube/go.mod replaces %s with %s, want %s for Kubernetes %s",
				r.Old.Path, r.New.Version, v.StagingVersion(), v.Kubernetes)
		}
	}
	return nil
}

// CheckEtcd reports whether a committed etcd/go.mod pins what versions.env says.
func CheckEtcd(goMod []byte, v versions.Versions) error {
	f, err := modfile.Parse("etcd/go.mod", goMod, nil)
	if err != nil {
		return fmt.Errorf("parse etcd/go.mod: %w", err)
	}
	return checkRequire(f, "etcd/go.mod", etcdServer, v.Etcd)
}

// CheckCoreDNS reports whether a committed coredns/go.mod pins what versions.env says.
func CheckCoreDNS(goMod []byte, v versions.Versions) error {
	f, err := modfile.Parse("coredns/go.mod", goMod, nil)
	if err != nil {
		return fmt.Errorf("parse coredns/go.mod: %w", err)
	}
	return checkRequire(f, "coredns/go.mod", coreDNS, v.CoreDNS)
}

// CheckFlannel reports whether a committed flannel/go.mod pins what
// versions.env says and still stands in for the unserved SDK.
func CheckFlannel(goMod []byte, v versions.Versions) error {
	f, err := modfile.Parse("flannel/go.mod", goMod, nil)
	if err != nil {
		return fmt.Errorf("parse flannel/go.mod: %w", err)
	}
	if err := checkRequire(f, "flannel/go.mod", Flannel, v.Flannel); err != nil {
		return err
	}
	for _, r := range f.Replace {
		if r.Old.Path == tencentVPC && r.New.Path == "./tencentvpc" {
			return nil
		}
	}
	return fmt.Errorf("flannel/go.mod does not replace %s by ./tencentvpc", tencentVPC)
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
