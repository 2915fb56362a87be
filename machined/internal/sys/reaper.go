package sys

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reaper waits for every child of PID 1: orphans re-parented to it as well as the services it starts. Once
// it runs, nothing else may wait for children (a wait elsewhere would steal an exit status), so services
// are started through Start, which hands back their exit.
type Reaper struct {
	mu      sync.Mutex
	waiting map[int]chan Exit
	orphans func(pid int, status unix.WaitStatus)
}

// Exit is how a process ended.
type Exit struct {
	Pid    int
	Status unix.WaitStatus
}

// Err is nil for a clean exit, else an *ExitError.
func (e Exit) Err() error {
	if e.Status.Exited() && e.Status.ExitStatus() == 0 {
		return nil
	}
	return &ExitError{Status: e.Status}
}

// ExitError is a process that did not exit cleanly.
type ExitError struct{ Status unix.WaitStatus }

func (e *ExitError) Error() string {
	switch {
	case e.Status.Exited():
		return fmt.Sprintf("exit status %d", e.Status.ExitStatus())
	case e.Status.Signaled():
		return fmt.Sprintf("killed by signal %s", e.Status.Signal())
	}
	return fmt.Sprintf("wait status %#x", uint32(e.Status))
}

// ExitCode is the exit status, or -1 for a process killed by a signal (as os.ProcessState reports it).
func (e *ExitError) ExitCode() int {
	if e.Status.Exited() {
		return e.Status.ExitStatus()
	}
	return -1
}

// Starter adapts the reaper to proc.Starter: the exit arrives as an error.
func (r *Reaper) Starter() StarterFunc {
	return func(cmd *exec.Cmd) (<-chan error, error) {
		exit, err := r.Start(cmd)
		if err != nil {
			return nil, err
		}
		ch := make(chan error, 1)
		go func() { ch <- (<-exit).Err() }()
		return ch, nil
	}
}

// StarterFunc is a function that implements proc.Starter.
type StarterFunc func(cmd *exec.Cmd) (<-chan error, error)

// Start implements proc.Starter.
func (f StarterFunc) Start(cmd *exec.Cmd) (<-chan error, error) { return f(cmd) }

// NewReaper starts reaping; orphans (may be nil) is told of each reaped process nobody waited for.
func NewReaper(orphans func(pid int, status unix.WaitStatus)) *Reaper {
	r := &Reaper{waiting: map[int]chan Exit{}, orphans: orphans}
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, syscall.SIGCHLD)
	go func() {
		for range ch {
			r.reap()
		}
	}()
	r.reap() // children that ended before the handler was set
	return r
}

// Start starts cmd and returns a channel that receives its exit. Do not call cmd.Wait; cmd's Stdout and
// Stderr must be *os.File (or nil), since nothing will copy from pipes.
func (r *Reaper) Start(cmd *exec.Cmd) (<-chan Exit, error) {
	ch := make(chan Exit, 1)
	// Hold the lock across start and registration, so a child that dies at once is not taken for an orphan.
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r.waiting[cmd.Process.Pid] = ch
	return ch, nil
}

func (r *Reaper) reap() {
	for {
		var st unix.WaitStatus
		pid, err := unix.Wait4(-1, &st, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		r.mu.Lock()
		ch, ok := r.waiting[pid]
		delete(r.waiting, pid)
		r.mu.Unlock()
		if ok {
			ch <- Exit{Pid: pid, Status: st}
		} else if r.orphans != nil {
			r.orphans(pid, st)
		}
	}
}

// BecomeSubreaper makes orphaned descendants re-parent to this process instead of PID 1; tests use it to
// act as PID 1 without being it.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
