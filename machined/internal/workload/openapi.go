package workload

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/cairn-os/cairn/machined/internal/health"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// The OpenAPI documents kubectl reads before it sends anything: `kubectl apply` and `create` check each
// object's kind against the v3 document of its group-version, and fall back to the whole v2 document
// (in protobuf) for a kind no v3 document lists, such as the List that `kubectl get -o json` prints.
// The API server builds each one on first request and caches it. The v3 documents are one group each
// and quick to build; the v2 one is the whole API as megabytes of JSON turned into protobuf: its first
// request took 45 s on an idle TCG control plane (the next, 3.4 s) and over a minute while the add-on
// pods start, and kubectl gives up after 32 s.
var openAPIDocs = []struct{ path, accept string }{
	{"/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
}

// openAPIWarmTimeout bounds the whole warm-up; past it the node goes on without it.
const openAPIWarmTimeout = 5 * time.Minute

// The warm-up waits for the add-ons, polling their health every openAPISettlePoll, for at most
// openAPISettleMax after the node is Running.
const (
	openAPISettlePoll = 5 * time.Second
	openAPISettleMax  = 3 * time.Minute
)

// warmOpenAPIWhenSettled warms the OpenAPI cache once this control plane's add-ons are ready (or
// openAPISettleMax has passed), off the boot's path. The build is one vCPU of the API server for 20 to
// 30 s under emulation: run while the boot waited for its pod network (until 2026-12-03), it held
// Running back by that long and took the CPU the controller-manager's start needed, on which the
// add-ons' pods wait. A kubectl that needs the v2 document before the warm-up has made it builds it
// itself, and one that asks during the build waits for that build instead of starting another (the API
// server computes it once, under a lock).
func (w *Workload) warmOpenAPIWhenSettled(ctx context.Context) {
	if w.Renderer() == nil {
		return // no Kubernetes on this node (sandbox mode without a payload): no API server to warm
	}
	up := func(ctx context.Context) bool {
		return !slices.ContainsFunc(health.Run(ctx, w.addonProbes()), func(c health.Check) bool { return c.Err != nil })
	}
	if !afterSettled(ctx, up, openAPISettlePoll, openAPISettleMax) {
		return
	}
	w.warmOpenAPI(ctx)
}

// afterSettled waits until up reports true, asking every poll, or until limit has passed, and reports
// whether ctx is still live.
func afterSettled(ctx context.Context, up func(context.Context) bool, poll, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !up(ctx) && time.Now().Before(deadline) {
		if !sleep(ctx, poll) {
			return false
		}
	}
	return ctx.Err() == nil
}

// warmOpenAPI has this node's API server build and cache its OpenAPI documents, so a user's kubectl is
// answered from the cache instead of paying the build (and timing out on a slow machine). The cache
// lives in the API server's memory: every boot of every control plane does this. It never fails
// anything: an API server that cannot answer now builds the document on the first real request, as it
// would have anyway.
func (w *Workload) warmOpenAPI(ctx context.Context) {
	c, err := w.admin()
	if err != nil {
		w.Log.Warn("OpenAPI documents not cached", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, openAPIWarmTimeout)
	defer cancel()
	for _, d := range openAPIDocs {
		start := time.Now()
		n, err := c.Fetch(ctx, d.path, d.accept)
		// The API server gives up on a request after a minute (504), but the build goes on and its
		// result is cached: asking again waits for the rest of it.
		for isTimeout(err) && sleep(ctx, time.Second) {
			n, err = c.Fetch(ctx, d.path, d.accept)
		}
		if err != nil {
			w.Log.Warn("OpenAPI document not cached: the first kubectl that needs it waits for the API server to build it",
				"path", d.path, "err", err)
			return
		}
		w.Log.Info("OpenAPI document cached", "path", d.path, "bytes", n, "took", time.Since(start).Round(time.Millisecond))
	}
}

// isTimeout tells the API server's own 504 (its request timeout) from other failures.
func isTimeout(err error) bool {
	var se *kubeapi.StatusError
	return errors.As(err, &se) && se.Code == http.StatusGatewayTimeout
}

// sleep waits d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
