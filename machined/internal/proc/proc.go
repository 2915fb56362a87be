// Package proc starts programs in a way that works both in sandbox mode and as PID 1. As PID 1, machined
// reaps every child itself (orphans included), so nothing else may wait for a child: a program's exit
// comes through a Starter instead of exec.Cmd.Wait.
package proc

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Starter starts a command and reports its end: the PID-1 reaper on a real node, exec's own Wait in
// sandbox mode. The command's Stdout and Stderr must be *os.File or nil.
type Starter interface {
	Start(cmd *exec.Cmd) (<-chan error, error)
}

// Exec starts commands with os/exec and waits with cmd.Wait.
type Exec struct{}

// Start implements Starter.
func (Exec) Start(cmd *exec.Cmd) (<-chan error, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return ch, nil
}

// Output runs cmd to completion and returns its combined output. When ctx ends first the program gets
// SIGTERM, then SIGKILL after a grace period.
func Output(ctx context.Context, s Starter, cmd *exec.Cmd) ([]byte, error) {
	if s == nil {
		s = Exec{}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	exit, err := s.Start(cmd)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&out, r); r.Close(); close(copied) }()
	select {
	case err = <-exit:
	case <-ctx.Done():
		err = Stop(cmd, exit, 5*time.Second)
		if ctx.Err() != nil {
			err = ctx.Err()
		}
	}
	<-copied
	return out.Bytes(), err
}

// Stop sends SIGTERM, waits up to grace for the exit, then kills the process group.
func Stop(cmd *exec.Cmd, exit <-chan error, grace time.Duration) error {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exit:
		return err
	case <-time.After(grace):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Process.Kill()
		return <-exit
	}
}
