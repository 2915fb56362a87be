package containerd

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"

	"github.com/cairn-os/cairn/machined/internal/logring"
)

// Container runs one container as a supervised service (supervisor.Runner): every run creates the
// container afresh from its image and spec, so a crashed or killed one leaves nothing stale behind.
type Container struct {
	Client    func() *client.Client // the client is made once containerd runs
	Namespace string
	ID        string
	Image     string
	Spec      []oci.SpecOpts
	Grace     time.Duration
}

// Run implements supervisor.Runner.
func (c *Container) Run(ctx context.Context, log *logring.Ring, started func(pid int)) error {
	cli := c.Client()
	if cli == nil {
		return errors.New("containerd is not running")
	}
	nctx := namespaces.WithNamespace(context.Background(), c.Namespace)
	if err := c.remove(nctx, cli); err != nil {
		return err
	}
	img, err := cli.GetImage(nctx, c.Image)
	if err != nil {
		return fmt.Errorf("image %s: %w", c.Image, err)
	}
	opts := append([]oci.SpecOpts{withImageConfig(img)}, c.Spec...)
	ctr, err := cli.NewContainer(nctx, c.ID, client.WithImage(img), client.WithNewSnapshot(c.ID+"-snapshot", img),
		client.WithNewSpec(opts...))
	if err != nil {
		return fmt.Errorf("create container %s: %w", c.ID, err)
	}
	w := log.Writer()
	defer w.Close()
	task, err := ctr.NewTask(nctx, cio.NewCreator(cio.WithStreams(nil, w, w)))
	if err != nil {
		return fmt.Errorf("create task %s: %w", c.ID, err)
	}
	exit, err := task.Wait(nctx)
	if err != nil {
		return fmt.Errorf("wait for %s: %w", c.ID, err)
	}
	if err := task.Start(nctx); err != nil {
		return fmt.Errorf("start %s: %w", c.ID, err)
	}
	started(int(task.Pid()))
	// Whatever ends the run, the container goes with it; the next run creates it afresh.
	defer c.remove(nctx, cli)
	select {
	case st := <-exit:
		code, _, err := st.Result()
		if err == nil {
			err = fmt.Errorf("exited with status %d", code)
		}
		return err
	case <-ctx.Done():
	}
	grace := c.Grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	task.Kill(nctx, syscall.SIGTERM)
	select {
	case <-exit:
	case <-time.After(grace):
		task.Kill(nctx, syscall.SIGKILL, client.WithKillAll)
		<-exit
	}
	return ctx.Err()
}

// remove deletes a container left by an earlier run (or an earlier boot).
func (c *Container) remove(ctx context.Context, cli *client.Client) error {
	ctr, err := cli.LoadContainer(ctx, c.ID)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load container %s: %w", c.ID, err)
	}
	if task, err := ctr.Task(ctx, nil); err == nil {
		task.Kill(ctx, syscall.SIGKILL, client.WithKillAll)
		if st, err := task.Wait(ctx); err == nil {
			select {
			case <-st:
			case <-time.After(10 * time.Second):
			}
		}
		if _, err := task.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete old task %s: %w", c.ID, err)
		}
	}
	if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete old container %s: %w", c.ID, err)
	}
	return nil
}
