package containerd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// withImageConfig does what oci.WithImageConfig does for the images machined runs (the kubelet's,
// etcd's for etcdutl), all built by Cairn to run as root: the image's environment under the spec's,
// its entrypoint and command, its working directory. containerd's own also resolves the image's user
// and groups through the image's /etc/passwd and /etc/group, and that path links text/template, whose
// reflection on method names makes the linker keep every exported method of every type machined
// links: 7 MB of a 32 MB binary, paged in, carried in the image and loaded on every boot. An image
// that names another user is refused rather than run as root by mistake.
func withImageConfig(img client.Image) oci.SpecOpts {
	return func(ctx context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		spec, err := img.Spec(ctx)
		if err != nil {
			return fmt.Errorf("image %s: config: %w", img.Name(), err)
		}
		if err := applyImageConfig(s, spec.Config); err != nil {
			return fmt.Errorf("image %s: %w", img.Name(), err)
		}
		return nil
	}
}

// defaultPath is the environment of an image that sets none, as containerd's.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func applyImageConfig(s *oci.Spec, c ocispec.ImageConfig) error {
	switch c.User {
	case "", "0", "0:0", "root", "root:root":
	default:
		return fmt.Errorf("runs as user %q; machined runs its own containers as root only", c.User)
	}
	if s.Process == nil {
		s.Process = &specs.Process{}
	}
	env := c.Env
	if len(env) == 0 {
		env = []string{defaultPath}
	}
	// As containerd does: what the spec already sets wins over the image's.
	s.Process.Env = mergeEnv(env, s.Process.Env)
	s.Process.Args = append(slices.Clone(c.Entrypoint), c.Cmd...)
	s.Process.Cwd = cmp.Or(c.WorkingDir, "/")
	return nil
}

// mergeEnv returns base with each of over's variables replacing base's of the same name, or appended.
func mergeEnv(base, over []string) []string {
	out := slices.Clone(base)
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(b string) bool {
			n, _, _ := strings.Cut(b, "=")
			return n == name
		})
		if i < 0 {
			out = append(out, kv)
		} else {
			out[i] = kv
		}
	}
	return out
}
