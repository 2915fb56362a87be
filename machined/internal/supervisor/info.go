// Package supervisor runs the node's services (containerd, kubelet, ...) and reports on them: each has a
// state, a health, a restart count and the last error. Crashed services are restarted with capped
// exponential backoff; a crash loop never blocks the API.
package supervisor

import (
	"sort"
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

func sortInfos(infos []Info) {
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
}
