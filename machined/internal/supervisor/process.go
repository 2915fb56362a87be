package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/cairn-os/cairn/machined/internal/logring"
	"github.com/cairn-os/cairn/machined/internal/proc"
)

// Process runs a program as a service, its output going to the service's log.
type Process struct {
	Path    string
	Args    []string
	Env     []string
	Starter proc.Starter
	// Grace is how long a stopping process gets between SIGTERM and SIGKILL.
	Grace time.Duration
	// Prepare runs before every start (directories, config files).
	Prepare func() error
	// Cgroup, when set, is the cgroup v2 directory the process starts in (CLONE_INTO_CGROUP: it never
	// runs a moment anywhere else, and neither does anything it forks before it could be moved).
	Cgroup string
}

// Run implements Runner.
func (p *Process) Run(ctx context.Context, log *logring.Ring, started func(pid int)) error {
	if p.Prepare != nil {
		if err := p.Prepare(); err != nil {
			return err
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = p.Env
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group, so a stop reaches the children it forks (containerd's shims are not among
	// them: they detach on purpose and outlive a containerd restart).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var cg *os.File
	if p.Cgroup != "" {
		cg, err = os.Open(p.Cgroup)
		if err != nil {
			r.Close()
			w.Close()
			return fmt.Errorf("start %s: cgroup: %w", p.Path, err)
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.Fd())
	}
	starter := p.Starter
	if starter == nil {
		starter = proc.Exec{}
	}
	exit, err := starter.Start(cmd)
	w.Close()
	if cg != nil {
		cg.Close()
	}
	if err != nil {
		r.Close()
		return fmt.Errorf("start %s: %w", p.Path, err)
	}
	go func() { log.Consume(r); r.Close() }()
	started(cmd.Process.Pid)
	select {
	case err := <-exit:
		return err
	case <-ctx.Done():
	}
	grace := p.Grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	proc.Stop(cmd, exit, grace)
	return ctx.Err()
}
