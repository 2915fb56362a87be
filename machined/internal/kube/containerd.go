package kube

import (
	"bytes"
	"fmt"
	"path/filepath"

	toml "github.com/pelletier/go-toml/v2"
)

// ContainerdOptions are the node-level choices for containerd's config.
type ContainerdOptions struct {
	// RestrictOOMScoreAdj keeps CRI from asking runc for an oom_score_adj below containerd's own. Only
	// sandbox mode sets it: this host lacks CAP_SYS_RESOURCE, so lowering it fails and every pod sandbox
	// with it. A Cairn node needs no such restriction.
	RestrictOOMScoreAdj bool
	// CNIBinDir is where the CNI plugins are: the payload's cni directory.
	CNIBinDir string
	// ShimCgroup is the cgroup the shims run in, below the cgroup root ("" leaves them in containerd's).
	ShimCgroup string
}

// The config's shape, in containerd 2.4's own version-4 layout (docs/man/containerd-config.toml.5.md,
// docs/cri/config.md): the servers are plugins (io.containerd.server.v1.grpc, ...), and CRI is split
// into io.containerd.cri.v1.images, io.containerd.cri.v1.runtime and io.containerd.grpc.v1.cri.
// Version 3 still loads but is migrated, with a warning, at every start. Only what Cairn sets is
// written; containerd fills in the rest.
type containerdConfig struct {
	Version         int            `toml:"version"`
	Root            string         `toml:"root"`
	State           string         `toml:"state"`
	DisabledPlugins []string       `toml:"disabled_plugins"`
	Plugins         map[string]any `toml:"plugins"`
}

// serverAddress is a server plugin's socket. In version 4 each server has its own default under
// /run/containerd, so both are set: in sandbox mode nothing may land in the host's /run/containerd.
type serverAddress struct {
	Address string `toml:"address"`
}

type criImages struct {
	Snapshotter string `toml:"snapshotter"`
	// PinnedImages keeps the sandbox image from image garbage collection: it cannot be pulled again.
	PinnedImages map[string]string `toml:"pinned_images"`
	// The registry hosts directory machined writes from machine.registries (mirrors, CAs,
	// credentials). Without any, containerd reaches registries directly; the node's own images are
	// never pulled (they are imported at boot, and CRI pulls the pause image only when it is missing).
	Registry criRegistry `toml:"registry"`
}

type criRegistry struct {
	ConfigPath string `toml:"config_path"`
}

type criRuntime struct {
	RestrictOOMScoreAdj bool `toml:"restrict_oom_score_adj"`
	// StatsCollectPeriod: containerd 2.4 asks every container's shim for its cgroup statistics once a
	// second by default (about 25 file reads each), whether or not anyone reads them. The kubelet
	// samples every 10 s, so that is the period here: on a control plane with ten containers the
	// shims and containerd used a tenth of the node's idle CPU on these reads.
	StatsCollectPeriod string              `toml:"stats_collect_period"`
	Containerd         criRuntimeContainer `toml:"containerd"`
	CNI                criCNI              `toml:"cni"`
}

type criRuntimeContainer struct {
	DefaultRuntimeName string                    `toml:"default_runtime_name"`
	Runtimes           map[string]runtimeHandler `toml:"runtimes"`
}

// runtimeHandler is one runtime CRI can run pods with (a RuntimeClass handler).
type runtimeHandler struct {
	RuntimeType string      `toml:"runtime_type"`
	Options     runcOptions `toml:"options"`
}

type runcOptions struct {
	// No systemd on the node: runc manages cgroups through cgroupfs, like the kubelet.
	SystemdCgroup bool `toml:"SystemdCgroup"`
	// Root is runc's state directory; under containerd's state so sandbox mode keeps pods' runc state
	// out of the host's /run/containerd (on a node it is runc's default).
	Root string `toml:"Root"`
	// ShimCgroup is the cgroup each shim joins when it starts (see cgroups.Shims).
	ShimCgroup string `toml:"ShimCgroup,omitempty"`
}

type criCNI struct {
	BinDirs    []string `toml:"bin_dirs"`
	ConfDir    string   `toml:"conf_dir"`
	MaxConfNum int      `toml:"max_conf_num"`
	// UseInternalLoopback: containerd sets a pod's lo up itself (one netlink call) instead of running
	// the loopback CNI plugin, a Go program of its own, at every pod network's set-up and tear-down.
	// The result is the same lo; under emulation each run of a plugin costs about 0.2 s of CPU.
	UseInternalLoopback bool `toml:"use_internal_loopback"`
}

// ContainerdConfig is containerd's config.toml: state under paths, CRI with the bundled pause image as
// the sandbox image, runc without systemd cgroups, and Cairn's CNI directories.
func (r *Renderer) ContainerdConfig(o ContainerdOptions) (File, error) {
	l := r.layout
	binDir := o.CNIBinDir
	if binDir == "" {
		return File{}, fmt.Errorf("render containerd config: no CNI plugin directory")
	}
	cfg := containerdConfig{
		Version: 4,
		Root:    l.ContainerdRoot(),
		State:   l.ContainerdState(),
		// opt would create /opt/containerd on the read-only root; NRI has no plugins to serve here.
		DisabledPlugins: []string{"io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri"},
		Plugins: map[string]any{
			"io.containerd.server.v1.grpc":  serverAddress{Address: l.ContainerdSocket()},
			"io.containerd.server.v1.ttrpc": serverAddress{Address: l.ContainerdSocket() + ".ttrpc"},
			"io.containerd.cri.v1.images": criImages{
				Snapshotter:  "overlayfs",
				PinnedImages: map[string]string{"sandbox": r.images.Pause},
				Registry:     criRegistry{ConfigPath: l.RegistryHostsDir()},
			},
			"io.containerd.cri.v1.runtime": criRuntime{
				RestrictOOMScoreAdj: o.RestrictOOMScoreAdj,
				StatsCollectPeriod:  "10s",
				Containerd: criRuntimeContainer{
					DefaultRuntimeName: "runc",
					Runtimes: map[string]runtimeHandler{
						"runc": {RuntimeType: "io.containerd.runc.v2", Options: runcOptions{
							SystemdCgroup: false, Root: filepath.Join(l.ContainerdState(), "runc"), ShimCgroup: o.ShimCgroup,
						}},
					},
				},
				// The payload's plugins first: Cairn's own network config always runs the checked ones,
				// even when an add-on installs plugins of the same names into /opt/cni/bin.
				CNI: criCNI{BinDirs: []string{binDir, l.AddonCNIBinDir()}, ConfDir: l.CNIConfDir(), MaxConfNum: 1, UseInternalLoopback: true},
			},
		},
	}
	var buf bytes.Buffer
	buf.WriteString("# Written by machined; changes are lost at the next boot.\n")
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(true)
	if err := enc.Encode(cfg); err != nil {
		return File{}, fmt.Errorf("encode containerd config: %w", err)
	}
	return File{Path: l.ContainerdConfig(), Data: buf.Bytes(), Mode: modePublic}, nil
}
