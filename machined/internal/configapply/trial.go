package configapply

import (
	"sync"
	"time"
)

// Trial times a config applied in try mode: unless Confirm is called within the timeout, revert runs.
// One trial at a time; a new one replaces (and stops) the one before.
type Trial struct {
	// AfterFunc is time.AfterFunc, replaced in tests.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)

	mu      sync.Mutex
	pending *attempt
}

type attempt struct {
	stop func() bool
}

// Start times a trial: revert runs after timeout unless Confirm comes first.
func (t *Trial) Start(timeout time.Duration, revert func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending != nil {
		t.pending.stop()
	}
	a := &attempt{}
	after := t.AfterFunc
	if after == nil {
		after = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	a.stop = after(timeout, func() {
		t.mu.Lock()
		if t.pending != a {
			t.mu.Unlock()
			return // confirmed or replaced meanwhile
		}
		t.pending = nil
		t.mu.Unlock()
		revert()
	})
	t.pending = a
}

// Confirm keeps the config on trial; false when no trial is pending (none started, confirmed already,
// or reverted).
func (t *Trial) Confirm() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		return false
	}
	t.pending.stop()
	t.pending = nil
	return true
}

// Cancel ends a pending trial without reverting it (a reboot brings back the stored config anyway).
func (t *Trial) Cancel() { t.Confirm() }
