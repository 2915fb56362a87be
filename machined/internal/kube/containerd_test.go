package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	toml "github.com/pelletier/go-toml/v2"
)

func TestContainerdConfigGolden(t *testing.T) {
	for _, tt := range []struct {
		name, root, golden string
		opts               ContainerdOptions
	}{
		{"node", "/", "containerd/config.toml", ContainerdOptions{CNIBinDir: "/usr/lib/cairn/payload/cni", ShimCgroup: "/shims"}},
		{"sandbox", "/tmp/sbx", "containerd/config-sandbox.toml", ContainerdOptions{RestrictOOMScoreAdj: true, CNIBinDir: "/work/_out/bundle/cni"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := newRendererAt(t, tt.root).ContainerdConfig(tt.opts)
			if err != nil {
				t.Fatalf("ContainerdConfig: %v", err)
			}
			golden(t, tt.golden, f.Data)
		})
	}
}

// The keys containerd 2.4 reads (docs/cri/config.md, docs/man/containerd-config.toml.5.md), looked up the way containerd does: a key that is
// misspelt or in the wrong table would be ignored by containerd without a word.
func TestContainerdConfigKeys(t *testing.T) {
	f, err := newRendererAt(t, "/tmp/sbx").ContainerdConfig(ContainerdOptions{RestrictOOMScoreAdj: true, CNIBinDir: "/tmp/sbx/usr/lib/cairn/payload/cni"})
	if err != nil {
		t.Fatalf("ContainerdConfig: %v", err)
	}
	var doc map[string]any
	if err := toml.Unmarshal(f.Data, &doc); err != nil {
		t.Fatalf("parse: %v\n%s", err, f.Data)
	}
	lookup := func(keys ...string) any {
		var v any = doc
		for _, k := range keys {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		}
		return v
	}
	images := []string{"plugins", "io.containerd.cri.v1.images"}
	runtime := []string{"plugins", "io.containerd.cri.v1.runtime"}
	runc := append(append([]string(nil), runtime...), "containerd", "runtimes", "runc")
	got := map[string]any{
		"version":         lookup("version"),
		"root":            lookup("root"),
		"state":           lookup("state"),
		"grpc.address":    lookup("plugins", "io.containerd.server.v1.grpc", "address"),
		"ttrpc.address":   lookup("plugins", "io.containerd.server.v1.ttrpc", "address"),
		"sandbox":         lookup(append(images, "pinned_images", "sandbox")...),
		"snapshotter":     lookup(append(images, "snapshotter")...),
		"config_path":     lookup(append(images, "registry", "config_path")...),
		"restrict_oom":    lookup(append(runtime, "restrict_oom_score_adj")...),
		"default_runtime": lookup(append(runtime, "containerd", "default_runtime_name")...),
		"runtime_type":    lookup(append(runc, "runtime_type")...),
		"SystemdCgroup":   lookup(append(runc, "options", "SystemdCgroup")...),
		"runc root":       lookup(append(runc, "options", "Root")...),
		"bin_dirs":        lookup(append(runtime, "cni", "bin_dirs")...),
		"conf_dir":        lookup(append(runtime, "cni", "conf_dir")...),
	}
	want := map[string]any{
		"version":         int64(4),
		"root":            "/tmp/sbx/var/lib/containerd",
		"state":           "/tmp/sbx/run/containerd",
		"grpc.address":    "/tmp/sbx/run/containerd/containerd.sock",
		"ttrpc.address":   "/tmp/sbx/run/containerd/containerd.sock.ttrpc",
		"sandbox":         "registry.k8s.io/pause:3.10.2",
		"snapshotter":     "overlayfs",
		"config_path":     "/tmp/sbx/etc/containerd/certs.d",
		"restrict_oom":    true,
		"default_runtime": "runc",
		"runtime_type":    "io.containerd.runc.v2",
		"SystemdCgroup":   false,
		"runc root":       "/tmp/sbx/run/containerd/runc",
		"bin_dirs":        []any{"/tmp/sbx/usr/lib/cairn/payload/cni", "/tmp/sbx/opt/cni/bin"},
		"conf_dir":        "/tmp/sbx/etc/cni/net.d",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("containerd config keys (-want +got):\n%s", diff)
	}
}
