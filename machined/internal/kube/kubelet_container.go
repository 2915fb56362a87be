package kube

import (
	"context"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// kubeletBinary is the kubelet's path in the kubelet image (image/bundle).
const kubeletBinary = "/usr/local/bin/kubelet"

// Mount is one bind mount of a container.
type Mount struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// Options are the OCI mount options: rbind, ro or rw, and the propagation (rshared, rslave).
	Options []string `json:"options"`
	// Optional mounts are left out when their source does not exist (/etc/machine-id; /lib/modules in
	// sandbox mode).
	Optional bool `json:"optional,omitempty"`
}

// Container is a privileged host-level container as plain data: what runs and what it sees of the host.
type Container struct {
	Image string `json:"image"`
	// Args is the whole command line, binary first.
	Args []string `json:"args"`
	Env  []string `json:"env"`
	// Mounts replace the default mounts at the same place or below (a bind of /dev replaces the
	// default /dev tmpfs and /dev/pts, /dev/shm, /dev/mqueue).
	Mounts []Mount `json:"mounts"`
	// HostNamespaces are the host namespaces the container shares (it gets no namespace of these kinds).
	HostNamespaces []specs.LinuxNamespaceType `json:"hostNamespaces"`
	Privileged     bool                       `json:"privileged"`
	// RootfsPropagation is the propagation of the container's root mount. "shared" keeps runc from
	// making every mount a slave (its default), which would stop an rshared mount's new mounts from
	// reaching the host.
	RootfsPropagation string `json:"rootfsPropagation"`
}

// KubeletContainer is the kubelet as a containerd container: host network, PID, IPC and UTS (it
// manages the node and its pods' sandboxes, and reports the host's hostname), privileged (cgroups,
// mounts, devices), and the host directories it works in.
//
// Every directory the kubelet hands to containerd (its root dir, pod logs, static pod hostPaths under
// /etc/kubernetes) is mounted at the same path as on the host, so a path means the same to both.
// /var/lib/kubelet is rshared: volumes the kubelet mounts there (secrets, projected tokens, emptyDir
// on tmpfs) must propagate to the host, where containerd and runc bind them into pods. That needs the
// host side of /var/lib/kubelet to be a shared mount too (machined's job before starting the kubelet).
func (r *Renderer) KubeletContainer(o KubeletOptions) Container {
	l := r.layout
	same := func(path string, opts ...string) Mount {
		return Mount{Source: path, Destination: path, Options: append([]string{"rbind"}, opts...)}
	}
	to := func(src, dst string, optional bool, opts ...string) Mount {
		return Mount{Source: src, Destination: dst, Options: append([]string{"rbind"}, opts...), Optional: optional}
	}
	etcKubernetes := "ro"
	if o.Bootstrap {
		etcKubernetes = "rw" // the kubelet writes kubelet.conf once its bootstrap CSR is approved
	}
	mounts := []Mount{
		to("/dev", "/dev", false, "rw", "rslave"),
		to("/sys", "/sys", false, "rw", "rslave"), // includes /sys/fs/cgroup: the kubelet manages pod cgroups
		same(l.Kubernetes(), etcKubernetes),
		same(l.KubeletDir(), "rw", "rshared"),
		same(l.Log(), "rw", "rslave"), // pod logs (containerd writes, the kubelet rotates)
		// Only containerd's state from /run (its socket, and the task mounts it makes, through rslave);
		// the rest of the container's /run is its own tmpfs.
		same(l.ContainerdState(), "rw", "rslave"),
		// The image filesystem's usage (image GC, eviction) is measured by the kubelet with statfs.
		same(l.ContainerdRoot(), "ro", "rslave"),
		to(l.ResolvConf(), resolvConfInKubelet, false, "ro"),
		to(r.paths.Join("etc", "hosts"), "/etc/hosts", true, "ro"),
		to(r.paths.Join("etc", "machine-id"), "/etc/machine-id", true, "ro"),
		// The node's OS, which the kubelet reports as the Node's osImage.
		to(r.paths.Join("etc", "os-release"), "/etc/os-release", true, "ro"),
		to(r.paths.Join("lib", "modules"), "/lib/modules", true, "ro"),
		// Not read by the kubelet since dockershim left; mounted so diagnostics in the container see the
		// same network config containerd uses.
		to(l.CNIConfDir(), l.CNIConfDir(), true, "ro"),
	}
	return Container{
		Image:  r.images.Kubelet,
		Args:   append([]string{kubeletBinary}, r.KubeletArgs(o)...),
		Env:    []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Mounts: sortMounts(mounts),
		HostNamespaces: []specs.LinuxNamespaceType{
			specs.NetworkNamespace, specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.CgroupNamespace,
		},
		Privileged:        true,
		RootfsPropagation: "shared",
	}
}

// sortMounts orders mounts so a parent directory is mounted before anything below it.
func sortMounts(ms []Mount) []Mount {
	sort.SliceStable(ms, func(i, j int) bool {
		return filepath.Clean(ms[i].Destination) < filepath.Clean(ms[j].Destination)
	})
	return ms
}

// SpecOpts turns the container into containerd spec options, applied after the defaults (and after
// oci.WithImageConfig, if the caller uses it: the args here win). exists reports whether a host path
// exists; optional mounts whose source is missing are left out. A nil exists keeps every mount.
func (c Container) SpecOpts(exists func(path string) bool) oci.SpecOpts {
	var mounts []specs.Mount
	for _, m := range c.Mounts {
		if m.Optional && exists != nil && !exists(m.Source) {
			continue
		}
		mounts = append(mounts, specs.Mount{
			Type: "bind", Source: m.Source, Destination: m.Destination, Options: append([]string(nil), m.Options...),
		})
	}
	opts := []oci.SpecOpts{
		oci.WithProcessArgs(c.Args...),
		oci.WithEnv(c.Env),
		withoutMountsUnder(mounts),
		oci.WithMounts(mounts),
		withoutRlimit("RLIMIT_NOFILE"),
	}
	if c.Privileged {
		opts = append(opts, oci.WithPrivileged, oci.WithAllDevicesAllowed, oci.WithNewPrivileges)
	}
	for _, ns := range c.HostNamespaces {
		opts = append(opts, oci.WithHostNamespace(ns))
	}
	if c.RootfsPropagation != "" {
		opts = append(opts, withRootfsPropagation(c.RootfsPropagation))
	}
	return oci.Compose(opts...)
}

// withoutMountsUnder drops the spec's mounts at or below the destination of one of ms.
func withoutMountsUnder(ms []specs.Mount) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		kept := s.Mounts[:0]
		for _, old := range s.Mounts {
			if !underAny(old.Destination, ms) {
				kept = append(kept, old)
			}
		}
		s.Mounts = kept
		return nil
	}
}

func underAny(dest string, ms []specs.Mount) bool {
	dest = filepath.Clean(dest)
	for _, m := range ms {
		d := filepath.Clean(m.Destination)
		if dest == d || strings.HasPrefix(dest, d+"/") || d == "/" {
			return true
		}
	}
	return false
}

// withoutRlimit removes a default rlimit so the process inherits containerd's. The default spec caps
// open files at 1024, far too few for the kubelet, and raising a hard limit needs CAP_SYS_RESOURCE,
// which the sandbox host does not give even to root.
func withoutRlimit(typ string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			return nil
		}
		kept := s.Process.Rlimits[:0]
		for _, rl := range s.Process.Rlimits {
			if rl.Type != typ {
				kept = append(kept, rl)
			}
		}
		s.Process.Rlimits = kept
		return nil
	}
}

func withRootfsPropagation(p string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		s.Linux.RootfsPropagation = p
		return nil
	}
}
