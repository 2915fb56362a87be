// Package containerd runs the container runtime for the node: containerd itself as a supervised process,
// the registration of the images the node's payload carries (no registry is reachable), imports of image
// archives, and containers run as supervised services (kubelet) through the containerd Go client.
package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Namespaces: Kubernetes' images and pods live in k8s.io (what the CRI plugin uses); Cairn's own system
// containers (kubelet) in cairn, out of the CRI's sight.
const (
	NamespaceK8s   = "k8s.io"
	NamespaceCairn = "cairn"
)

// Connect waits until containerd answers on its socket.
func Connect(ctx context.Context, socket string) (*client.Client, error) {
	var last error
	for {
		if _, err := os.Stat(socket); err == nil {
			cli, err := client.New(socket, client.WithTimeout(5*time.Second))
			if err == nil {
				serving, err := cli.IsServing(ctx)
				if err == nil && serving {
					return cli, nil
				}
				cli.Close()
				last = err
			} else {
				last = err
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("containerd did not answer on %s: %v (%w)", socket, last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ImportOptions say which images an Import names and unpacks, and how it names them.
type ImportOptions struct {
	// Keep selects the images to unpack and name (nil: all). The others' content is dropped.
	Keep func(name string) bool
	// RefName turns an OCI layout's org.opencontainers.image.ref.name into the image's name (nil: as it
	// is); io.containerd.image.name and a docker archive's RepoTags are used as they are.
	RefName func(ref string) string
	// Unpacking is told each image's name before it is unpacked (progress; nil: not told).
	Unpacking func(name string)
}

// Import imports an image archive (an OCI image layout or a docker save archive, as an uncompressed tar
// stream) into a namespace for this machine's platform, unpacks the images into the default snapshotter
// (the one the CRI uses), so a container starts from them without a pull, and only then gives them their
// names. It returns the images named.
//
// Nothing is left half-imported. The names come last because a name is what the CRI reacts to: it sees
// the image at once (so might the kubelet) and adds an image-ID reference of its own (sha256:CONFIG) that
// outlives the name, which client.Import, naming images before they are unpacked, would leave behind
// for an image that then fails to unpack. One lease holds the content and snapshots until the names
// reference them; on any failure the names this import wrote are deleted or put back, and the lease goes
// synchronously, so the garbage collector has removed what nothing references when Import returns.
func Import(ctx context.Context, cli *client.Client, r io.Reader, namespace string, o ImportOptions) (named []images.Image, err error) {
	ctx = namespaces.WithNamespace(ctx, namespace)
	ls := cli.LeasesService()
	lease, err := ls.Create(ctx, leases.WithRandomID(), leases.WithExpiration(24*time.Hour))
	if err != nil {
		return nil, fmt.Errorf("import into %s: lease: %w", namespace, err)
	}
	ctx = leases.WithLease(ctx, lease.ID)
	defer func() {
		// Cleaning up must happen even when the caller's context was cancelled (an interrupted upload).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err != nil {
			_ = ls.Delete(cctx, lease, leases.SynchronousDelete)
			return
		}
		_ = ls.Delete(cctx, lease)
	}()
	cs := cli.ContentStore()
	index, err := archive.ImportIndex(ctx, cs, r)
	if err != nil {
		return nil, fmt.Errorf("import into %s: %w", namespace, err)
	}
	found, err := indexImages(ctx, cs, index, o.RefName)
	if err != nil {
		return nil, fmt.Errorf("import into %s: %w", namespace, err)
	}
	var imgs []images.Image
	for _, img := range found {
		if o.Keep == nil || o.Keep(img.Name) {
			imgs = append(imgs, img)
		}
	}
	for _, img := range imgs {
		if o.Unpacking != nil {
			o.Unpacking(img.Name)
		}
		if err := client.NewImageWithPlatform(cli, img, platforms.Default()).Unpack(ctx, ""); err != nil {
			return nil, fmt.Errorf("unpack %s: %w", img.Name, err)
		}
	}
	if err := nameImages(ctx, cli.ImageService(), ls, lease, imgs); err != nil {
		return nil, fmt.Errorf("import into %s: %w", namespace, err)
	}
	return imgs, nil
}

// indexImages walks an imported index as client.Import does (children filtered by platform, each parent
// labelled with its children so the garbage collector keeps them) and returns the named entries for this
// platform: io.containerd.image.name, or the OCI ref name through refName.
func indexImages(ctx context.Context, cs content.Store, index ocispec.Descriptor, refName func(string) string) ([]images.Image, error) {
	platform := platforms.Default()
	var found []images.Image
	walk := images.HandlerFunc(func(ctx context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		if desc.Digest != index.Digest {
			return images.Children(ctx, cs, desc)
		}
		b, err := content.ReadBlob(ctx, cs, desc)
		if err != nil {
			return nil, err
		}
		var idx ocispec.Index
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, fmt.Errorf("index.json: %w", err)
		}
		for _, m := range idx.Manifests {
			name := m.Annotations[images.AnnotationImageName]
			if ref := m.Annotations[ocispec.AnnotationRefName]; name == "" && ref != "" {
				name = ref
				if refName != nil {
					name = refName(ref)
				}
			}
			if name != "" && (m.Platform == nil || platform.Match(*m.Platform)) {
				found = append(found, images.Image{Name: name, Target: m})
			}
		}
		return idx.Manifests, nil
	})
	if err := images.WalkNotEmpty(ctx, images.SetChildrenLabels(cs, images.FilterPlatforms(walk, platform)), index); err != nil {
		return nil, err
	}
	return found, nil
}

// nameImages writes the images' names; if one fails, the names already written are deleted or pointed back
// at their old targets (which the lease keeps meanwhile).
func nameImages(ctx context.Context, is images.Store, ls leases.Manager, lease leases.Lease, imgs []images.Image) error {
	type undo struct {
		name string
		old  *images.Image
	}
	var done []undo
	for _, img := range imgs {
		var old *images.Image
		if prev, err := is.Get(ctx, img.Name); err == nil {
			old = &prev
			_ = ls.AddResource(ctx, lease, leases.Resource{ID: prev.Target.Digest.String(), Type: "content"})
		}
		_, err := is.Update(ctx, img, "target")
		if errdefs.IsNotFound(err) {
			_, err = is.Create(ctx, img)
		}
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			for _, u := range done {
				if u.old != nil {
					_, _ = is.Update(cctx, *u.old, "target")
				} else {
					_ = is.Delete(cctx, u.name)
				}
			}
			return fmt.Errorf("name %s: %w", img.Name, err)
		}
		done = append(done, undo{img.Name, old})
	}
	return nil
}

// ShortName drops the registry from an image reference for messages.
func ShortName(ref string) string {
	if i := strings.Index(ref, "/"); i > 0 && strings.ContainsAny(ref[:i], ".:") {
		return ref[i+1:]
	}
	return ref
}
