//go:build integration

package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/paths"
)

// checkPayload registers the built payload's images (`make payload`, _out/payload) the way a node does
// at boot, then lists them as bundled and unpacked, refuses to remove one, and runs the pause image:
// its container's root filesystem is the payload's unpacked layer, reached through the snapshot's link.
func checkPayload(ctx context.Context, t *testing.T, cli *client.Client, p paths.Paths) {
	dir, _ := filepath.Abs(filepath.Join("..", "..", "..", "_out", "payload"))
	ix, err := payload.ReadIndex(dir)
	if err != nil {
		t.Skipf("no built payload (make payload): %v", err)
	}
	snapshots := filepath.Join(kube.NewLayout(p).ContainerdRoot(), "io.containerd.snapshotter.v1."+containerd.Snapshotter)
	start := time.Now()
	names, err := containerd.RegisterPayload(ctx, cli, dir, Namespace, snapshots, "test", nil)
	if err != nil {
		t.Fatalf("RegisterPayload: %v", err)
	}
	t.Logf("registered %d images in %v", len(names), time.Since(start))
	// Again, as every boot does: nothing new, no error.
	if _, err := containerd.RegisterPayload(ctx, cli, dir, Namespace, snapshots, "test", nil); err != nil {
		t.Fatalf("RegisterPayload again: %v", err)
	}
	b := &Service{Paths: p, Client: func() *client.Client { return cli }, Bundled: func() ([]string, error) { return ix.Names(), nil }}
	imgs, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pause string
	for _, want := range ix.Names() {
		i := slices.IndexFunc(imgs, func(i Image) bool { return i.Name == want })
		if i < 0 || !imgs[i].Bundled || !imgs[i].Unpacked {
			t.Errorf("List() has %v for %s, want it bundled and unpacked", imgs, want)
		}
		if strings.HasPrefix(want, "registry.k8s.io/pause:") {
			pause = want
		}
	}
	if _, err := b.Remove(ctx, []string{pause}, false); !errors.As(err, new(*ProtectedError)) {
		t.Errorf("Remove(%s) = %v, want a ProtectedError", pause, err)
	}

	nctx := namespaces.WithNamespace(ctx, Namespace)
	img, err := cli.GetImage(nctx, pause)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := img.IsUnpacked(nctx, containerd.Snapshotter); err != nil || !ok {
		t.Fatalf("%s IsUnpacked = %v, %v", pause, ok, err)
	}
	c, err := cli.NewContainer(nctx, "payload-pause", client.WithImage(img), client.WithNewSnapshot("payload-pause", img),
		client.WithNewSpec(oci.WithImageConfig(img)))
	if err != nil {
		t.Fatalf("container from %s: %v", pause, err)
	}
	defer c.Delete(context.WithoutCancel(nctx), client.WithSnapshotCleanup)
	task, err := c.NewTask(nctx, cio.NullIO)
	if err != nil {
		t.Fatalf("task of %s: %v", pause, err)
	}
	defer task.Delete(context.WithoutCancel(nctx), client.WithProcessKill)
	if err := task.Start(nctx); err != nil {
		t.Fatalf("start %s: %v", pause, err)
	}
	// The running pause binary is the payload's file: its root is the layer the snapshot links to. runc
	// execs it a moment after the task has started.
	var exe string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if exe, err = os.Readlink(filepath.Join("/proc", strconv.Itoa(int(task.Pid())), "exe")); err == nil && exe == "/pause" {
			return
		}
	}
	t.Errorf("the pause container runs %q (%v), want /pause", exe, err)
}
