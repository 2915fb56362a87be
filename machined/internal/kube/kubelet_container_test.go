package kube

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestKubeletContainerGolden(t *testing.T) {
	for _, tt := range []struct {
		name, root, golden string
		opts               KubeletOptions
	}{
		{"control plane", "/", "kubelet/container.json", KubeletOptions{}},
		{"worker in sandbox", "/tmp/sbx", "kubelet/container-sandbox-worker.json", KubeletOptions{Bootstrap: true, AllowCgroupV1: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, err := json.MarshalIndent(newRendererAt(t, tt.root).KubeletContainer(tt.opts), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.golden, append(data, '\n'))
		})
	}
}

// generateSpec builds the OCI spec containerd would give runc: its defaults, then our options.
func generateSpec(t *testing.T, c Container, exists func(string) bool) *oci.Spec {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), "cairn")
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "kubelet"}, c.SpecOpts(exists))
	if err != nil {
		t.Fatalf("GenerateSpec: %v", err)
	}
	return s
}

func TestKubeletOCISpec(t *testing.T) {
	r := newRendererAt(t, "/tmp/sbx")
	s := generateSpec(t, r.KubeletContainer(KubeletOptions{}), nil)

	t.Run("namespaces", func(t *testing.T) {
		var got []specs.LinuxNamespaceType
		for _, ns := range s.Linux.Namespaces {
			got = append(got, ns.Type)
		}
		// Only its own mount namespace: network, PID, IPC, UTS and cgroup are the host's.
		if diff := cmp.Diff([]specs.LinuxNamespaceType{specs.MountNamespace}, got); diff != "" {
			t.Errorf("namespaces (-want +got):\n%s", diff)
		}
	})

	t.Run("propagation", func(t *testing.T) {
		if s.Linux.RootfsPropagation != "shared" {
			t.Errorf("rootfsPropagation = %q, want shared (runc's default rslave would cut rshared mounts off the host)", s.Linux.RootfsPropagation)
		}
		m := findMount(t, s, "/tmp/sbx/var/lib/kubelet")
		if m.Source != "/tmp/sbx/var/lib/kubelet" || !slices.Contains(m.Options, "rshared") || !slices.Contains(m.Options, "rbind") {
			t.Errorf("/var/lib/kubelet mount = %+v, want an rbind of the same host path with rshared", m)
		}
	})

	t.Run("mounts", func(t *testing.T) {
		want := map[string]struct {
			src string
			opt string
		}{
			"/dev":                        {"/dev", "rw"},
			"/sys":                        {"/sys", "rw"},
			"/tmp/sbx/etc/kubernetes":     {"/tmp/sbx/etc/kubernetes", "ro"},
			"/tmp/sbx/var/log":            {"/tmp/sbx/var/log", "rw"},
			"/tmp/sbx/run/containerd":     {"/tmp/sbx/run/containerd", "rw"},
			"/tmp/sbx/var/lib/containerd": {"/tmp/sbx/var/lib/containerd", "ro"},
			"/etc/resolv.conf":            {"/tmp/sbx/etc/resolv.conf", "ro"},
			"/etc/hosts":                  {"/tmp/sbx/etc/hosts", "ro"},
			"/etc/machine-id":             {"/tmp/sbx/etc/machine-id", "ro"},
			"/etc/os-release":             {"/tmp/sbx/etc/os-release", "ro"},
			"/lib/modules":                {"/tmp/sbx/lib/modules", "ro"},
			"/tmp/sbx/etc/cni/net.d":      {"/tmp/sbx/etc/cni/net.d", "ro"},
			"/tmp/sbx/var/lib/kubelet":    {"/tmp/sbx/var/lib/kubelet", "rw"},
			"/proc":                       {"proc", ""},
			"/run":                        {"tmpfs", ""},
		}
		var dests []string
		for _, m := range s.Mounts {
			dests = append(dests, m.Destination)
			w, ok := want[m.Destination]
			if !ok {
				t.Errorf("unexpected mount %+v (a default that should have been replaced?)", m)
				continue
			}
			if m.Source != w.src || (w.opt != "" && !slices.Contains(m.Options, w.opt)) {
				t.Errorf("mount %s = source %q options %v, want source %q with %q", m.Destination, m.Source, m.Options, w.src, w.opt)
			}
		}
		if len(dests) != len(want) {
			t.Errorf("mount destinations = %v, want the %d of the table", dests, len(want))
		}
		// A parent must be mounted before its children (/run before /run/containerd).
		for i, d := range dests {
			for _, later := range dests[i+1:] {
				if strings.HasPrefix(d, later+"/") {
					t.Errorf("%s is mounted before its parent %s", d, later)
				}
			}
		}
	})

	t.Run("privileged", func(t *testing.T) {
		if s.Process.NoNewPrivileges {
			t.Errorf("noNewPrivileges = true, want false")
		}
		if len(s.Linux.MaskedPaths) != 0 || len(s.Linux.ReadonlyPaths) != 0 {
			t.Errorf("masked %v readonly %v, want none", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
		}
		if s.Linux.Seccomp != nil {
			t.Errorf("seccomp = %+v, want unconfined", s.Linux.Seccomp)
		}
		allowAll := false
		for _, d := range s.Linux.Resources.Devices {
			if d.Allow && (d.Type == "a" || d.Type == "") && d.Major == nil && d.Minor == nil && d.Access == "rwm" {
				allowAll = true
			}
		}
		if !allowAll {
			t.Errorf("device cgroup rules %+v, want all devices allowed", s.Linux.Resources.Devices)
		}
		if !slices.Contains(s.Process.Capabilities.Bounding, "CAP_SYS_ADMIN") {
			t.Errorf("bounding capabilities %v, want CAP_SYS_ADMIN among them", s.Process.Capabilities.Bounding)
		}
		for _, rl := range s.Process.Rlimits {
			if rl.Type == "RLIMIT_NOFILE" {
				t.Errorf("rlimit %+v, want none (inherit containerd's)", rl)
			}
		}
	})

	t.Run("process", func(t *testing.T) {
		args := s.Process.Args
		if len(args) == 0 || args[0] != "/usr/local/bin/kubelet" || !slices.Contains(args, "--root-dir=/tmp/sbx/var/lib/kubelet") {
			t.Errorf("args = %v, want the kubelet with --root-dir under the sandbox root", args)
		}
	})
}

func TestKubeletOptionalMounts(t *testing.T) {
	r := newTestRenderer(t)
	missing := map[string]bool{"/etc/machine-id": true, "/lib/modules": true, "/etc/resolv.conf": true}
	s := generateSpec(t, r.KubeletContainer(KubeletOptions{}), func(p string) bool { return !missing[p] })
	var got []string
	for _, m := range s.Mounts {
		got = append(got, m.Destination)
	}
	for _, gone := range []string{"/etc/machine-id", "/lib/modules"} {
		if slices.Contains(got, gone) {
			t.Errorf("mounts %v include %s, whose source is missing and which is optional", got, gone)
		}
	}
	// resolv.conf is required: without it the kubelet cannot give pods DNS, so containerd must fail
	// loudly rather than start a kubelet that fails every pod.
	if !slices.Contains(got, "/etc/resolv.conf") {
		t.Errorf("mounts %v lack /etc/resolv.conf, which is not optional", got)
	}
}

func TestKubeletContainerBootstrapWritable(t *testing.T) {
	r := newTestRenderer(t)
	for _, tt := range []struct {
		opts KubeletOptions
		want string
	}{{KubeletOptions{}, "ro"}, {KubeletOptions{Bootstrap: true}, "rw"}} {
		c := r.KubeletContainer(tt.opts)
		for _, m := range c.Mounts {
			if m.Destination == "/etc/kubernetes" && !slices.Contains(m.Options, tt.want) {
				t.Errorf("KubeletContainer(Bootstrap=%v) /etc/kubernetes options = %v, want %s", tt.opts.Bootstrap, m.Options, tt.want)
			}
		}
	}
}

func findMount(t *testing.T, s *oci.Spec, dest string) specs.Mount {
	t.Helper()
	for _, m := range s.Mounts {
		if m.Destination == dest {
			return m
		}
	}
	t.Fatalf("no mount at %s", dest)
	return specs.Mount{}
}
