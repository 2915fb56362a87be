// Package gocmd runs the go command for the bundle's builders (cmd/bundle and the conformance suite's):
// in a directory, without a go.work from outside and with the local toolchain (the one the stamps hash),
// with a line every minute while a long build is silent.
package gocmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Result is what a finished command cost.
type Result struct {
	Took    time.Duration
	PeakRSS int64 // bytes, of the largest process in the command's tree
}

// env is the environment every command gets: GOWORK=off, so no go.work outside may change what our
// modules resolve; GOTOOLCHAIN=local, to build with the toolchain the stamps hashed.
func env(extra []string) []string {
	return append(append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local"), extra...)
}

// Run executes argv in dir with extra environment, its output going to stderr. While it runs, alive is
// called every minute with the time so far (a cold Kubernetes build is silent for minutes).
func Run(ctx context.Context, dir string, extra []string, alive func(time.Duration), argv ...string) (Result, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env(extra)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr

	start := time.Now()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				alive(time.Since(start))
			}
		}
	}()
	err := cmd.Run()
	close(done)
	res := Result{Took: time.Since(start)}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			// Linux reports ru_maxrss in KiB; wait4 folds in reaped children, so this is the largest
			// compile or link of the build.
			res.PeakRSS = ru.Maxrss * 1024
		}
	}
	if err != nil {
		return res, fmt.Errorf("%s in %s: %w", strings.Join(argv, " "), dir, err)
	}
	return res, nil
}

// Output runs a command with extra environment and returns its stdout (for `go env`, `go list`).
func Output(ctx context.Context, dir string, extra []string, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env(extra)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", strings.Join(argv, " "), dir, err)
	}
	return out, nil
}

// ModuleTime is the publication time the module proxy reports for the version of module that dir's
// go.mod requires: a real date that never changes between builds, for version stamps.
func ModuleTime(ctx context.Context, dir, module string) (string, error) {
	b, err := Output(ctx, dir, nil, "go", "list", "-m", "-json", module)
	if err != nil {
		return "", err
	}
	var m struct {
		Version string
		Time    *time.Time
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("parse go list output for %s: %w", module, err)
	}
	if m.Time == nil {
		return "", fmt.Errorf("module %s %s: proxy reported no time", module, m.Version)
	}
	return m.Time.UTC().Format(time.RFC3339), nil
}
