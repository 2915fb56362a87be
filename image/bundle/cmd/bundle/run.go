package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// runResult is what a finished command cost.
type runResult struct {
	Took    time.Duration
	PeakRSS int64 // bytes, of the largest process in the command's tree
}

// run executes argv in dir with extra environment, streaming its output to
// stderr. While it runs, a line every minute shows it is still alive (a cold
// Kubernetes build is silent for minutes).
func run(ctx context.Context, label, dir string, env []string, argv ...string) (runResult, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	// GOWORK=off: no go.work outside may change what our modules resolve.
	// GOTOOLCHAIN=local: build with the toolchain we hashed into the stamp.
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local"), env...)
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
				progress("    %s: still running (%s)", label, time.Since(start).Round(time.Second))
			}
		}
	}()
	err := cmd.Run()
	close(done)
	res := runResult{Took: time.Since(start)}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			// Linux reports ru_maxrss in KiB; wait4 folds in reaped
			// children, so this is the largest compile or link of the build.
			res.PeakRSS = ru.Maxrss * 1024
		}
	}
	if err != nil {
		return res, fmt.Errorf("%s: %s in %s: %w", label, argv, dir, err)
	}
	return res, nil
}

// output runs a command and returns its stdout (for `go env`, `go list`).
func output(ctx context.Context, dir string, argv ...string) ([]byte, error) {
	return outputEnv(ctx, dir, nil, argv...)
}

// outputEnv is output with extra environment.
func outputEnv(ctx context.Context, dir string, env []string, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local"), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", argv, dir, err)
	}
	return out, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bundle: "+format+"\n", args...)
}

func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
