// Package diskspace watches how full the node's volumes are. A volume that fills up (EPHEMERAL with
// images and pod logs, STATE with machined's logs, ETCD with etcd's database) breaks what writes to it,
// and nothing else on a node without a shell would say so: the monitor puts a warning in `status` while a
// volume is full and an event on the bus when it becomes full and when it has room again.
package diskspace

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Full is the share of a volume in use from which it counts as full.
const Full = 0.95

// Interval is how often the volumes are measured.
const Interval = 30 * time.Second

// Volume is a volume to watch: its name (STATE, EPHEMERAL, ETCD) and where it is mounted.
type Volume struct{ Name, Path string }

// Monitor measures the volumes and keeps the warnings of the full ones.
type Monitor struct {
	Volumes []Volume
	// Usage measures the filesystem holding path (sys.Statfs); an error (not mounted yet, gone) skips it.
	Usage func(path string) (size, used uint64, err error)
	// Event reports a change: outcome "full" or "ok".
	Event func(outcome, message string)

	mu   sync.Mutex
	full map[string]string // volume name → its warning
}

// Run measures every Interval until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		m.Check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check measures each volume once and reports the changes.
func (m *Monitor) Check() {
	for _, v := range m.Volumes {
		size, used, err := m.Usage(v.Path)
		if err != nil || size == 0 {
			continue
		}
		m.mu.Lock()
		old, was := m.full[v.Name]
		m.mu.Unlock()
		share := float64(used) / float64(size)
		switch {
		case share >= Full:
			w := fmt.Sprintf("%s (%s) is %.0f%% full: %s of %s used; what writes there fails", v.Name, v.Path, 100*share, human(used), human(size))
			m.mu.Lock()
			if m.full == nil {
				m.full = map[string]string{}
			}
			m.full[v.Name] = w
			m.mu.Unlock()
			if !was && m.Event != nil {
				m.Event("full", w)
			}
		case was:
			m.mu.Lock()
			delete(m.full, v.Name)
			m.mu.Unlock()
			if m.Event != nil {
				m.Event("ok", fmt.Sprintf("%s (%s) has room again: %.0f%% used (was: %s)", v.Name, v.Path, 100*share, old))
			}
		}
	}
}

// Warnings are the full volumes' warnings, by volume name.
func (m *Monitor) Warnings() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.full))
	for _, w := range m.full {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

func human(n uint64) string {
	const mib = 1 << 20
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/mib)
}
