package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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
		{"kube", kube, "k8s.io/kubernetes " + v.Kubernetes},
		{"etcd", pin.RenderEtcd(v), "go.etcd.io/etcd/server/v3 " + v.Etcd},
		{"coredns", pin.RenderCoreDNS(v), "github.com/coredns/coredns " + v.CoreDNS},
		{"flannel", pin.RenderFlannel(v), pin.Flannel + " " + v.Flannel},
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
	return nil
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
