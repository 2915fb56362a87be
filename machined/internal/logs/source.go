// Package logs serves the node's logs to the Logs RPC: supervised services and machined itself from their
// in-memory rings, Kubernetes static pods from the CRI log files the kubelet keeps. It also keeps the rings
// on disk (rotating files under /var/log/cairn) and copies machined's own log into its ring.
package logs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/cairn-os/cairn/machined/internal/logring"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

// Rings are the supervisor's log rings (*supervisor.Supervisor).
type Rings interface {
	Logs(name string) *logring.Ring
	HasLogs(name string) bool
	List() []supervisor.Info
}

// PodNamespace is where the control plane's static pods run.
const PodNamespace = "kube-system"

// DefaultPoll is how often a followed pod log is checked for new lines and for a new file.
const DefaultPoll = 250 * time.Millisecond

// Source is the machine API's log source (server.LogSource).
type Source struct {
	Rings Rings
	// PodLogs is the kubelet's pod log directory (paths.Paths.Join("var", "log", "pods")); empty: no pods.
	PodLogs string
	// Poll is the follow interval for pod logs (0: DefaultPoll).
	Poll time.Duration
}

// NotFoundError says a service has no log here and which ones do.
type NotFoundError struct {
	Service string
	Known   []string
	Why     string // set: the service is known, but not what was asked of it
}

func (e *NotFoundError) Error() string {
	if e.Why != "" {
		return e.Why
	}
	if len(e.Known) == 0 {
		return fmt.Sprintf("no log named %q: this node has no logs yet", e.Service)
	}
	return fmt.Sprintf("no log named %q; known: %s", e.Service, strings.Join(e.Known, ", "))
}

// NotFound marks the error for the API, which answers NotFound.
func (e *NotFoundError) NotFound() {}

// Logs sends the last tail lines of a service's log (0: all kept) and, with follow, every later line until
// ctx ends. A supervised service or machined wins over a pod container of the same name.
func (s *Source) Logs(ctx context.Context, service string, tail int, follow bool, send func(logring.Record) error) error {
	if s.Rings != nil && s.Rings.HasLogs(service) {
		return sendRing(ctx, s.Rings.Logs(service), service, tail, follow, send)
	}
	if s.PodLogs != "" && validName(service) {
		path, _, err := newestLog(s.PodLogs, PodNamespace, service)
		switch {
		case err == nil:
			p := &podLog{root: s.PodLogs, namespace: PodNamespace, container: service, poll: s.poll()}
			return p.stream(ctx, path, tail, follow, send)
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
	}
	return &NotFoundError{Service: service, Known: s.names()}
}

// Previous sends the last tail lines (0: all) of a control-plane container's previous run: what it wrote
// before it exited, when the kubelet has started it again. The services whose logs machined keeps in
// memory need no such thing: their log already spans their restarts.
func (s *Source) Previous(ctx context.Context, service string, tail int, send func(logring.Record) error) error {
	if s.Rings != nil && s.Rings.HasLogs(service) {
		return &NotFoundError{Service: service, Known: s.names(),
			Why: fmt.Sprintf("%s's log is kept in memory across its restarts: `cairnctl logs %s` shows its earlier runs", service, service)}
	}
	if s.PodLogs == "" || !validName(service) {
		return &NotFoundError{Service: service, Known: s.names()}
	}
	path, err := previousLog(s.PodLogs, PodNamespace, service)
	if err != nil {
		return &NotFoundError{Service: service, Known: s.names(), Why: err.Error()}
	}
	p := &podLog{root: s.PodLogs, namespace: PodNamespace, container: service, poll: s.poll()}
	return p.stream(ctx, path, tail, false, send)
}

func (s *Source) poll() time.Duration {
	if s.Poll > 0 {
		return s.Poll
	}
	return DefaultPoll
}

// names lists every log this node can serve, sorted.
func (s *Source) names() []string {
	seen := map[string]bool{}
	if s.Rings != nil {
		for _, i := range s.Rings.List() {
			if s.Rings.HasLogs(i.Name) {
				seen[i.Name] = true
			}
		}
	}
	if s.PodLogs != "" {
		for _, c := range podContainers(s.PodLogs, PodNamespace) {
			seen[c] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// sendRing sends a ring's kept lines and, with follow, its later ones. A follower too slow for the ring
// misses lines rather than slowing the service (logring's rule).
func sendRing(ctx context.Context, r *logring.Ring, service string, tail int, follow bool, send func(logring.Record) error) error {
	line := func(l logring.Line) logring.Record {
		return logring.Record{Time: l.Time, Service: service, Line: l.Text}
	}
	if !follow {
		for _, l := range r.Tail(tail) {
			if err := send(line(l)); err != nil {
				return err
			}
		}
		return nil
	}
	kept, ch, cancel := r.Follow(tail)
	defer cancel()
	for _, l := range kept {
		if err := send(line(l)); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case l := <-ch:
			if err := send(line(l)); err != nil {
				return err
			}
		}
	}
}

// validName accepts a Kubernetes container name (a DNS label), so a service name never walks the file
// system.
func validName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
