// Package health holds the node's health checks: a Probe is one not yet run, a Check its result. It is
// shared by the code that runs the checks (workload) and the API that reports them (server), so neither
// imports the other for it.
package health

import (
	"context"
	"sync"
)

// Check is one health check's result: Err nil means it passed, and Message says what was seen.
type Check struct {
	Name    string
	Err     error
	Message string
}

// Probe is one health check to run: Run says what it saw, or why the check fails.
type Probe struct {
	Name string
	Run  func(context.Context) (string, error)
}

// Run runs the probes at the same time and returns their checks in the probes' order. Each probe may
// wait on something that does not answer yet (a DNS lookup waits out its timeout, a busy API server takes
// seconds), so an answer takes as long as its slowest probe instead of the sum of them all: a waiting
// `cairnctl health` sees a check pass as soon as the next answer can say so.
func Run(ctx context.Context, probes []Probe) []Check {
	checks := make([]Check, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() {
			msg, err := p.Run(ctx)
			checks[i] = Check{Name: p.Name, Err: err, Message: msg}
		})
	}
	wg.Wait()
	return checks
}
