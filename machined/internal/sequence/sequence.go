// Package sequence runs a sequence: an ordered list of named, idempotent tasks with timeouts. Every task
// start, end, skip and failure is an event. Once-only tasks (formatting, generating keys) are recorded in
// the node lock when they finish, so a sequence cut short by a power loss resumes without repeating them.
package sequence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-os/cairn/machined/internal/events"
)

// DefaultTimeout bounds a task that does not set its own.
const DefaultTimeout = 5 * time.Minute

// Task is one named step.
type Task struct {
	Name string
	// Once marks a task whose effect persists across boots (formatting a disk, generating a key): it is
	// recorded as done in the node lock and skipped on resume. Other tasks run on every pass and must be
	// idempotent.
	Once    bool
	Timeout time.Duration
	Run     func(ctx context.Context) error
}

// Progress is where once-only tasks are recorded (the node lock).
type Progress interface {
	IsDone(task string) bool
	MarkDone(task string) error
}

// Runner runs sequences.
type Runner struct {
	Bus      *events.Bus
	Log      *slog.Logger
	Progress Progress // nil: no task is once-only for this run (before the lock exists)
	Now      func() time.Time
}

// TaskError names the task that failed.
type TaskError struct {
	Sequence, Task string
	Err            error
}

func (e *TaskError) Error() string { return fmt.Sprintf("%s: task %s: %v", e.Sequence, e.Task, e.Err) }
func (e *TaskError) Unwrap() error { return e.Err }

// Run runs the tasks in order and stops at the first failure or when ctx ends.
func (r *Runner) Run(ctx context.Context, seq string, tasks []Task) error {
	now := r.Now
	if now == nil {
		now = time.Now
	}
	for _, t := range tasks {
		if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
			return &TaskError{Sequence: seq, Task: t.Name, Err: err}
		}
		if t.Once && r.Progress != nil && r.Progress.IsDone(t.Name) {
			r.publish(events.Event{Sequence: seq, Task: t.Name, Kind: events.KindTask, Outcome: events.Skipped, Message: "done on an earlier boot"})
			continue
		}
		start := now()
		r.publish(events.Event{Sequence: seq, Task: t.Name, Kind: events.KindTask, Outcome: events.Started})
		err := r.runOne(ctx, t)
		if err == nil && t.Once && r.Progress != nil {
			err = r.Progress.MarkDone(t.Name)
		}
		if err != nil {
			r.publish(events.Event{Sequence: seq, Task: t.Name, Kind: events.KindTask, Outcome: events.Failed, Error: err.Error(), Started: start})
			return &TaskError{Sequence: seq, Task: t.Name, Err: err}
		}
		r.publish(events.Event{Sequence: seq, Task: t.Name, Kind: events.KindTask, Outcome: events.Done, Started: start,
			Message: now().Sub(start).Round(time.Millisecond).String()})
	}
	return nil
}

func (r *Runner) runOne(ctx context.Context, t Task) (err error) {
	timeout := t.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timed out after %s", timeout))
	defer cancel()
	defer func() {
		// A bug in one task must not take PID 1 down with it.
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	err = t.Run(tctx)
	if err != nil && tctx.Err() != nil {
		if cause := context.Cause(tctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
	}
	return err
}

func (r *Runner) publish(e events.Event) {
	e = r.Bus.Publish(e)
	if r.Log == nil {
		return
	}
	attrs := []any{"sequence", e.Sequence, "task", e.Task, "outcome", e.Outcome}
	if e.Error != "" {
		attrs = append(attrs, "error", e.Error)
	}
	if e.Message != "" {
		attrs = append(attrs, "note", e.Message)
	}
	level := slog.LevelInfo
	if e.Outcome == events.Failed {
		level = slog.LevelError
	}
	r.Log.Log(context.Background(), level, "task", attrs...)
}
