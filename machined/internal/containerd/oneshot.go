package containerd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// OneShot runs a program from an image once, to completion: a tool a node needs now and then (etcdutl
// to restore a snapshot) without linking it into machined.
type OneShot struct {
	Client    *client.Client
	Namespace string
	ID        string
	Image     string
	// Binds are host paths made visible at the same paths inside, read-write, so the program's
	// arguments can name host files as they are.
	Binds []string
}

// Run runs args (args[0] is the program, as the image lays it out) to its end. A non-zero exit is an
// error that carries the last lines of the program's standard error (where its logs and its reason go);
// its standard output is dropped. The container is gone afterwards, whatever happened; one left by an
// interrupted run is removed first.
func (o OneShot) Run(ctx context.Context, args ...string) error {
	ctx = namespaces.WithNamespace(ctx, o.Namespace)
	c := Container{ID: o.ID}
	if err := c.remove(ctx, o.Client); err != nil {
		return err
	}
	img, err := o.Client.GetImage(ctx, o.Image)
	if err != nil {
		return fmt.Errorf("image %s: %w", o.Image, err)
	}
	opts := []oci.SpecOpts{withImageConfig(img), oci.WithProcessArgs(args...), oci.WithMounts(binds(o.Binds))}
	ctr, err := o.Client.NewContainer(ctx, o.ID, client.WithImage(img), client.WithNewSnapshot(o.ID+"-snapshot", img),
		client.WithNewSpec(opts...))
	if err != nil {
		return fmt.Errorf("create container %s: %w", o.ID, err)
	}
	defer ctr.Delete(context.WithoutCancel(ctx), client.WithSnapshotCleanup)
	// One stream, so one copier writes the buffer; it is read only after Delete has waited for it.
	var stderr bytes.Buffer
	task, err := ctr.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, io.Discard, &stderr)))
	if err != nil {
		return fmt.Errorf("create task %s: %w", o.ID, err)
	}
	exit, err := task.Wait(ctx)
	if err != nil {
		task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
		return fmt.Errorf("wait for %s: %w", o.ID, err)
	}
	if err := task.Start(ctx); err != nil {
		task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
		return fmt.Errorf("start %s: %w", o.ID, err)
	}
	var st client.ExitStatus
	select {
	case st = <-exit:
	case <-ctx.Done():
		task.Kill(context.WithoutCancel(ctx), syscall.SIGKILL, client.WithKillAll)
		st = <-exit
	}
	// Delete waits until the output is copied, so it is read after.
	if _, err := task.Delete(context.WithoutCancel(ctx)); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete task %s: %w", o.ID, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	code, _, err := st.Result()
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if code != 0 {
		return fmt.Errorf("%s exited with status %d: %s", args[0], code, lastLines(stderr.String(), 5))
	}
	return nil
}

// binds are read-write bind mounts of host paths at the same paths.
func binds(paths []string) []specs.Mount {
	var ms []specs.Mount
	for _, p := range paths {
		ms = append(ms, specs.Mount{Type: "bind", Source: p, Destination: p, Options: []string{"rbind", "rw"}})
	}
	return ms
}

// lastLines is the last n lines of s, on one line, for an error message.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
