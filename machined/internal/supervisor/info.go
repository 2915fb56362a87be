// Package supervisor runs the node's services (containerd, kubelet, ...) and reports on them: each has a
// state, a health, a restart count and the last error. Crashed services are restarted with capped
// exponential backoff; a crash loop never blocks the API.
package supervisor

import (
	"sort"
	"sync"
	"time"
)

// Service states.
const (
	StateRunning  = "running"
	StateStopped  = "stopped"
	StateWaiting  = "waiting"
	StateBackoff  = "backoff"
	StateFailed   = "failed"
	StateStarting = "starting"
)

// Health values.
const (
	Healthy   = "healthy"
	Unhealthy = "unhealthy"
	Unknown   = "unknown"
)

// Info is a snapshot of one service.
type Info struct {
	Name      string
	State     string
	Health    string
	Restarts  uint32
	LastError string
	Since     time.Time
	PID       int
}

// Registry holds the node's services by name.
type Registry struct {
	mu    sync.Mutex
	infos map[string]func() Info
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{infos: map[string]func() Info{}} }

// Register adds a service reporting through info; a later Register with the same name replaces it.
func (r *Registry) Register(name string, info func() Info) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.infos[name] = info
}

// List reports every service, sorted by name.
func (r *Registry) List() []Info {
	r.mu.Lock()
	fns := make([]func() Info, 0, len(r.infos))
	for _, f := range r.infos {
		fns = append(fns, f)
	}
	r.mu.Unlock()
	out := make([]Info, 0, len(fns))
	for _, f := range fns {
		out = append(out, f())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
