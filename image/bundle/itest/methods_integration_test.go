//go:build integration

package itest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cairn-os/cairn/image/bundle/internal/steps"
)

// TestKubeLooksUpNoMethodByName links the kube binary as the bundle builds it
// and fails, naming the callers, when anything in it looks methods up by name
// at run time (text/template, expr-lang, reflect's MethodByName): Go's linker
// then keeps every exported method of every type, 25.6 MB of a 153 MB binary
// that every control-plane process and CoreDNS pod maps. A new Kubernetes or
// CoreDNS version, or a plugin added to kube/coredns.go, can bring one in.
func TestKubeLooksUpNoMethodByName(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no Go toolchain")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "hack", "check-methods.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, filepath.Join("image", "bundle", "kube"), ".")
	cmd.Env = append(os.Environ(), "GOTAGS="+steps.KubeTags, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("hack/check-methods.sh image/bundle/kube: %v\n%s", err, out)
	}
}
