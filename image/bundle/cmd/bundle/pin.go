package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/image/bundle/internal/pin"
	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

// pinModules rewrites the wrapper modules' go.mod from versions.env and lets
// `go mod tidy` (inside those wrappers only) fill in go.sum.
func pinModules(ctx context.Context, src, versionsPath string) error {
	v, err := versions.Load(versionsPath)
	if err != nil {
		return err
	}
	// Outside every module, so the download cannot touch a go.sum of ours.
	scratch, err := os.MkdirTemp("", "cairn-pin-")
	if err != nil {
		return fmt.Errorf("create scratch dir: %w", err)
	}
	defer os.RemoveAll(scratch)
	k8sGoMod, err := downloadGoMod(ctx, scratch, "k8s.io/kubernetes@"+v.Kubernetes)
	if err != nil {
		return err
	}
	kube, err := pin.RenderKube(k8sGoMod, v)
	if err != nil {
		return err
	}
	for _, m := range []struct {
		dir    string
		gomod  []byte
		pinned string
	}{
		{"kube", kube, pin.Kubernetes + " " + v.Kubernetes + ", " + pin.CoreDNS + " " + v.CoreDNS + ", " + pin.Flannel + " " + v.Flannel},
		{"etcd", pin.RenderEtcd(v), "go.etcd.io/etcd/server/v3 and etcdutl/v3 " + v.Etcd},
		{"containerd", pin.RenderContainerd(v), pin.Containerd + " " + v.Containerd},
	} {
		dir := filepath.Join(src, m.dir)
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), m.gomod, 0o644); err != nil {
			return fmt.Errorf("write %s/go.mod: %w", m.dir, err)
		}
		progress("pin: %s/go.mod -> %s; running go mod tidy", m.dir, m.pinned)
		if _, err := run(ctx, m.dir+" tidy", dir, nil, "go", "mod", "tidy"); err != nil {
			return err
		}
	}
	return pinKubernetes(ctx, filepath.Join(src, "kube"), k8sGoMod)
}

// pinKubernetes keeps CoreDNS and flannel from raising a dependency of
// Kubernetes in the tidied kube wrapper (pin.PinKubernetes), and tidies again.
func pinKubernetes(ctx context.Context, dir string, k8sGoMod []byte) error {
	path := filepath.Join(dir, "go.mod")
	gomod, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read kube/go.mod: %w", err)
	}
	b, err := output(ctx, dir, "go", "list", "-m", "-json", "all")
	if err != nil {
		return err
	}
	selected := map[string]string{}
	for dec := json.NewDecoder(bytes.NewReader(b)); ; {
		var m struct{ Path, Version string }
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("parse go list output in kube: %w", err)
		}
		selected[m.Path] = m.Version
	}
	linked, err := kubernetesModules(ctx, dir)
	if err != nil {
		return err
	}
	pinned, n, err := pin.PinKubernetes(gomod, k8sGoMod, selected, linked)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, pinned, 0o644); err != nil {
		return fmt.Errorf("write kube/go.mod: %w", err)
	}
	progress("pin: kube/go.mod keeps Kubernetes' versions of %d modules CoreDNS or flannel requires newer; running go mod tidy", n)
	_, err = run(ctx, "kube tidy", dir, nil, "go", "mod", "tidy")
	return err
}

// kubernetesModules returns the modules of every package the Kubernetes
// components of the kube binary link: the dependencies of what its main
// package imports, CoreDNS's packages and flanneld's left out.
func kubernetesModules(ctx context.Context, dir string) (map[string]bool, error) {
	b, err := output(ctx, dir, "go", "list", "-f", `{{join .Imports "\n"}}`, ".")
	if err != nil {
		return nil, err
	}
	var pkgs []string
	for _, p := range strings.Fields(string(b)) {
		if !strings.HasPrefix(p, "github.com/coredns/") && p != pin.Flanneld {
			pkgs = append(pkgs, p)
		}
	}
	b, err = output(ctx, dir, append([]string{"go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}"}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	linked := map[string]bool{}
	for _, m := range strings.Fields(string(b)) {
		linked[m] = true
	}
	if !linked[pin.Kubernetes] {
		return nil, fmt.Errorf("kube: the main package imports no package of %s", pin.Kubernetes)
	}
	return linked, nil
}

// downloadGoMod fetches a module version through the configured proxy and
// returns its go.mod.
func downloadGoMod(ctx context.Context, dir, modVersion string) ([]byte, error) {
	b, err := output(ctx, dir, "go", "mod", "download", "-json", modVersion)
	if err != nil {
		return nil, err
	}
	var m struct{ GoMod, Error string }
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse go mod download output for %s: %w", modVersion, err)
	}
	if m.Error != "" {
		return nil, fmt.Errorf("download %s: %s", modVersion, m.Error)
	}
	gomod, err := os.ReadFile(m.GoMod)
	if err != nil {
		return nil, fmt.Errorf("read go.mod of %s: %w", modVersion, err)
	}
	return gomod, nil
}
