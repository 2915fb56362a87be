package images

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// LayerSpec is a layer and a line saying what it holds (image history).
type LayerSpec struct {
	Layer   v1.Layer
	Comment string
}

// Spec describes one image.
type Spec struct {
	Name         string // full reference, e.g. registry.k8s.io/pause:3.10.2
	Layers       []LayerSpec
	Entrypoint   []string
	Cmd          []string // arguments after the entrypoint, unless a pod gives its own
	Env          []string
	User         string
	ExposedPorts []string // e.g. "8080/tcp"
}

// Named is an image and the full reference containerd should tag it with.
type Named struct {
	Name  string
	Image v1.Image
}

// Build assembles an OCI image (linux/amd64) from spec.
func Build(spec Spec) (Named, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	adds := make([]mutate.Addendum, 0, len(spec.Layers))
	for _, l := range spec.Layers {
		adds = append(adds, mutate.Addendum{
			Layer:     l.Layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "cairn bundle", Comment: l.Comment},
		})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return Named{}, fmt.Errorf("image %s: add layers: %w", spec.Name, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return Named{}, fmt.Errorf("image %s: read config: %w", spec.Name, err)
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: Epoch}
	cfg.Config.Entrypoint = spec.Entrypoint
	cfg.Config.Cmd = spec.Cmd
	cfg.Config.Env = spec.Env
	cfg.Config.User = spec.User
	if len(spec.ExposedPorts) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range spec.ExposedPorts {
			cfg.Config.ExposedPorts[p] = struct{}{}
		}
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return Named{}, fmt.Errorf("image %s: set config: %w", spec.Name, err)
	}
	return Named{Name: spec.Name, Image: img}, nil
}
