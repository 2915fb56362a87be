package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/cairn-os/cairn/api/payload"
)

// Snapshotter is the snapshotter CRI uses (kube.ContainerdConfig sets it), whose snapshots the payload's
// layers become.
const Snapshotter = "overlayfs"

// Labels containerd's garbage collector follows: an image keeps its manifest, the manifest its config,
// the config the top snapshot of its layers (the chain below is kept by the snapshots' parents).
const (
	labelGCConfig   = "containerd.io/gc.ref.content.config"
	labelGCSnapshot = "containerd.io/gc.ref.snapshot." + Snapshotter
	// LabelPayload marks an image Cairn registered from its payload; its value is the payload's
	// SHA-256, and a changed value on an existing record means a new payload (an upgrade).
	LabelPayload = "cairn.dev/payload"
)

// RegisterPayload makes containerd know the payload's images without importing anything: each image's
// manifest and config go into the content store (a few KiB), and each of its layers becomes a committed
// snapshot whose directory is a link to the layer unpacked in the payload, so overlayfs stacks the
// payload's read-only directories directly. It costs milliseconds where an import decompressed and copied
// hundreds of MiB.
//
// The layers' compressed blobs are nowhere: an image registered this way is complete for running
// containers but not for export or push. Every call updates each image's record, even when nothing
// changed, because CRI rebuilds its image cache from those events: at its start it skips images whose
// layer blobs are missing.
//
// snapshotRoot is the overlayfs snapshotter's directory (under containerd's root); keep selects the
// images by name (nil: all). It returns the names registered.
func RegisterPayload(ctx context.Context, cli *client.Client, root, namespace, snapshotRoot, sum string, keep func(string) bool) ([]string, error) {
	ix, err := payload.ReadIndex(root)
	if err != nil {
		return nil, err
	}
	ctx = namespaces.WithNamespace(ctx, namespace)
	ctx, done, err := cli.WithLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("payload images: lease: %w", err)
	}
	defer done(context.WithoutCancel(ctx))
	r := registrar{cli: cli, root: root, snapshotRoot: snapshotRoot, sn: cli.SnapshotService(Snapshotter)}
	var names []string
	for _, img := range ix.Images {
		if keep != nil && !keep(img.Name) {
			continue
		}
		if err := r.register(ctx, img, sum); err != nil {
			return names, fmt.Errorf("payload image %s: %w", img.Name, err)
		}
		names = append(names, img.Name)
	}
	return names, nil
}

type registrar struct {
	cli          *client.Client
	root         string
	snapshotRoot string
	sn           snapshots.Snapshotter
}

func (r registrar) register(ctx context.Context, img payload.Image, sum string) error {
	diffIDs := make([]digest.Digest, len(img.Layers))
	for i, l := range img.Layers {
		diffIDs[i] = digest.Digest(l)
	}
	chain := identity.ChainIDs(diffIDs)
	var top string
	for i, id := range chain {
		if err := r.snapshot(ctx, id.String(), parentOf(chain, i), img.Layers[i]); err != nil {
			return err
		}
		top = id.String()
	}
	config := map[string]string{}
	if top != "" {
		config[labelGCSnapshot] = top
	}
	if err := r.blob(ctx, img.Config, config); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := r.blob(ctx, img.Manifest, map[string]string{labelGCConfig: img.Config.Digest}); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	rec := images.Image{
		Name:   img.Name,
		Target: ocispec.Descriptor{MediaType: img.Manifest.MediaType, Digest: digest.Digest(img.Manifest.Digest), Size: img.Manifest.Size},
		Labels: map[string]string{LabelPayload: sum},
	}
	is := r.cli.ImageService()
	if old, err := is.Get(ctx, img.Name); err == nil {
		// Keep labels others set (CRI marks the images it manages).
		for k, v := range old.Labels {
			if _, ours := rec.Labels[k]; !ours {
				rec.Labels[k] = v
			}
		}
		_, err = is.Update(ctx, rec, "target", "labels")
		return err
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	_, err := is.Create(ctx, rec)
	return err
}

func parentOf(chain []digest.Digest, i int) string {
	if i == 0 {
		return ""
	}
	return chain[i-1].String()
}

// snapshot commits the snapshot name on parent, its directory a link to the payload's unpacked layer,
// unless it exists already.
func (r registrar) snapshot(ctx context.Context, name, parent, diffID string) error {
	if _, err := r.sn.Stat(ctx, name); err == nil {
		return nil
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	h, err := payload.Hex(diffID)
	if err != nil {
		return err
	}
	layer := filepath.Join(r.root, payload.LayersDir, h)
	if fi, err := os.Stat(layer); err != nil || !fi.IsDir() {
		return fmt.Errorf("layer %s is not in the payload (%v)", diffID, err)
	}
	key := "cairn-payload-" + name
	// A key left by an interrupted registration would make Prepare fail: start again.
	if err := r.sn.Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove stale %s: %w", key, err)
	}
	mounts, err := r.sn.Prepare(ctx, key, parent)
	if err != nil {
		return fmt.Errorf("prepare snapshot of layer %s: %w", diffID, err)
	}
	dir, err := upperDir(mounts)
	if err != nil {
		return err
	}
	// The snapshotter made its own directory, which must be ours (under its root) and empty.
	if !strings.HasPrefix(dir, r.snapshotRoot+string(filepath.Separator)) {
		return fmt.Errorf("snapshot directory %s is not under %s", dir, r.snapshotRoot)
	}
	if err := os.Remove(dir); err != nil {
		return fmt.Errorf("replace snapshot directory: %w", err)
	}
	if err := os.Symlink(layer, dir); err != nil {
		return fmt.Errorf("link snapshot directory to the payload: %w", err)
	}
	if err := r.sn.Commit(ctx, name, key); err != nil {
		return fmt.Errorf("commit snapshot of layer %s: %w", diffID, err)
	}
	return nil
}

// upperDir is the directory an active overlayfs snapshot writes to: the source of its bind mount
// (no parent) or its overlay's upperdir.
func upperDir(mounts []mount.Mount) (string, error) {
	if len(mounts) != 1 {
		return "", fmt.Errorf("snapshotter returned %d mounts, want 1", len(mounts))
	}
	m := mounts[0]
	if m.Type == "bind" {
		return m.Source, nil
	}
	for _, o := range m.Options {
		if d, ok := strings.CutPrefix(o, "upperdir="); ok {
			return d, nil
		}
	}
	return "", errors.New("the snapshotter's overlay mount has no upperdir")
}

// blob puts a small blob from the payload into the content store with labels, unless it is there.
func (r registrar) blob(ctx context.Context, d payload.Descriptor, labels map[string]string) error {
	cs := r.cli.ContentStore()
	dg := digest.Digest(d.Digest)
	if info, err := cs.Info(ctx, dg); err == nil {
		info.Labels = mergeLabels(info.Labels, labels)
		var fields []string
		for k := range labels {
			fields = append(fields, "labels."+k)
		}
		if len(fields) == 0 {
			return nil
		}
		_, err := cs.Update(ctx, info, fields...)
		return err
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	h, err := payload.Hex(d.Digest)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(r.root, payload.BlobsDir, h))
	if err != nil {
		return err
	}
	defer f.Close()
	desc := ocispec.Descriptor{MediaType: d.MediaType, Digest: dg, Size: d.Size}
	return content.WriteBlob(ctx, cs, "cairn-payload-"+d.Digest, f, desc, content.WithLabels(labels))
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
