package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cairn-os/cairn/image/bundle/internal/gocmd"
)

// run executes argv in dir with extra environment, streaming its output to stderr, with a progress line
// every minute while it is silent.
func run(ctx context.Context, label, dir string, env []string, argv ...string) (gocmd.Result, error) {
	alive := func(d time.Duration) { progress("    %s: still running (%s)", label, d.Round(time.Second)) }
	res, err := gocmd.Run(ctx, dir, env, alive, argv...)
	if err != nil {
		return res, fmt.Errorf("%s: %w", label, err)
	}
	return res, nil
}

// output runs a command and returns its stdout (for `go env`, `go list`).
func output(ctx context.Context, dir string, argv ...string) ([]byte, error) {
	return gocmd.Output(ctx, dir, nil, argv...)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bundle: "+format+"\n", args...)
}

func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
