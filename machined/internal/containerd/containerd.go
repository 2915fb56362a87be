// Package containerd runs the container runtime for the node: containerd itself as a supervised process,
// the import of the image bundle the node carries (no registry is reachable), and containers run as
// supervised services (kubelet) through the containerd Go client.
package containerd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/platforms"
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

// ImportBundle imports the image archive into a namespace and unpacks the images whose names match keep
// (all when keep is nil), so containers start from them without a pull. It returns the names imported.
func ImportBundle(ctx context.Context, cli *client.Client, archive, namespace string, keep func(name string) bool) ([]string, error) {
	ctx = namespaces.WithNamespace(ctx, namespace)
	f, err := os.Open(archive)
	if err != nil {
		return nil, fmt.Errorf("image bundle: %w", err)
	}
	defer f.Close()
	imgs, err := cli.Import(ctx, f, client.WithImportPlatform(platforms.Default()))
	if err != nil {
		return nil, fmt.Errorf("import %s into %s: %w", archive, namespace, err)
	}
	var names []string
	for _, img := range imgs {
		if keep != nil && !keep(img.Name) {
			continue
		}
		i := client.NewImageWithPlatform(cli, img, platforms.Default())
		if err := i.Unpack(ctx, ""); err != nil {
			return names, fmt.Errorf("unpack %s: %w", img.Name, err)
		}
		names = append(names, img.Name)
	}
	return names, nil
}

// HasImages reports whether every named image is in the namespace (an earlier boot imported them).
func HasImages(ctx context.Context, cli *client.Client, namespace string, names []string) bool {
	ctx = namespaces.WithNamespace(ctx, namespace)
	for _, n := range names {
		if _, err := cli.ImageService().Get(ctx, n); err != nil {
			return false
		}
	}
	return len(names) > 0
}

// ShortName drops the registry from an image reference for messages.
func ShortName(ref string) string {
	if i := strings.Index(ref, "/"); i > 0 && strings.ContainsAny(ref[:i], ".:") {
		return ref[i+1:]
	}
	return ref
}
