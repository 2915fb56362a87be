// Package events is the node's event log: every transition, task, service change and refused request is an
// Event, kept in a bounded ring for late readers and fanned out to followers (the Events stream).
package events

import (
	"slices"
	"sync"
	"time"
)

// Kinds of events.
const (
	KindTransition = "transition"
	KindTask       = "task"
	KindService    = "service"
	KindLock       = "lock"
	KindJoin       = "join"
	KindAuth       = "auth"
	// KindVIP: this control plane took or gave up the cluster's virtual IP (vip.Acquired, ...).
	KindVIP = "vip"
	// KindWatchdog: the watchdog (hardware, or the kernel's softdog) was armed, or its petting stopped.
	KindWatchdog = "watchdog"
	// KindDisk: a volume became full, or has room again.
	KindDisk = "disk"
	// KindUpgrade: an upgrade or rollback was written, its trial boot confirmed, or it failed and the
	// node fell back to the other slot.
	KindUpgrade = "upgrade"
	// KindInstall: Cairn was installed onto a disk from the live medium, or the install failed.
	KindInstall = "install"
	// KindConfig: a changed config was applied, staged, confirmed or undone (cairnctl apply).
	KindConfig = "config"
	// KindSequence marks the end of a sequence (outcome done or failed).
	KindSequence = "sequence"
	// KindNames: the discovery names this node keeps in /etc/hosts (api.internal.<cluster> and the
	// control planes') changed, outcome "updated": a control plane joined, left or changed its address.
	KindNames = "names"
	// KindPlatform: an unconfigured node found user data on its platform and inits or joins with it
	// (outcome init or join), or could not use it (failed, with the reason).
	KindPlatform = "platform"
	// KindPayload: the ISO's payload stream is being unpacked onto the EPHEMERAL volume (outcome
	// unpacking, with how far it is) or was (unpacked).
	KindPayload = "payload"
)

// Task outcomes.
const (
	Started = "started"
	Done    = "done"
	Skipped = "skipped"
	Failed  = "failed"
)

// Event is one thing that happened on the node.
type Event struct {
	ID       uint64
	Time     time.Time
	State    string
	Sequence string
	Task     string
	Kind     string
	Outcome  string
	Error    string
	Message  string
	Started  time.Time
}

// Bus keeps the last Size events and delivers new ones to subscribers. A slow subscriber never blocks the
// node: when its buffer is full it is dropped and its channel closed, and the reader reconnects.
type Bus struct {
	mu     sync.Mutex
	ring   []Event
	next   int
	full   bool
	lastID uint64
	subs   map[chan Event]struct{}
	now    func() time.Time
	state  func() string
}

// Size is how many events the bus keeps.
const Size = 2048

// NewBus returns an empty bus. state reports the node's state for each event (nil: none).
func NewBus(now func() time.Time, state func() string) *Bus {
	if now == nil {
		now = time.Now
	}
	// The ring grows as events arrive, up to Size: a node in Running publishes few, and a full ring of
	// events is a few hundred KB the collector would scan on every cycle.
	return &Bus{subs: map[chan Event]struct{}{}, now: now, state: state}
}

// SetState sets the function that stamps each event with the node's state.
func (b *Bus) SetState(state func() string) {
	b.mu.Lock()
	b.state = state
	b.mu.Unlock()
}

// Publish records an event, filling in its ID, time and state.
func (b *Bus) Publish(e Event) Event {
	// The state is read before taking the bus's lock: the state machine publishes its transitions while
	// holding its own lock, so reading it under ours would invert the lock order.
	b.mu.Lock()
	stateOf := b.state
	b.mu.Unlock()
	if e.State == "" && stateOf != nil {
		e.State = stateOf()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastID++
	e.ID = b.lastID
	if e.Time.IsZero() {
		e.Time = b.now()
	}
	if len(b.ring) < Size {
		if len(b.ring) == cap(b.ring) { // grow by doubling, but never past Size
			b.ring = slices.Grow(b.ring, min(max(len(b.ring), 32), Size-len(b.ring)))
		}
		b.ring = append(b.ring, e)
	} else {
		b.ring[b.next] = e
		b.next = (b.next + 1) % Size
		b.full = true
	}
	for ch := range b.subs {
		select {
		case ch <- e:
		default:
			delete(b.subs, ch)
			close(ch)
		}
	}
	return e
}

// History returns up to tail kept events, oldest first (tail 0: all).
func (b *Bus) History(tail int) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.history(tail)
}

func (b *Bus) history(tail int) []Event {
	var out []Event
	if !b.full {
		out = append(out, b.ring...)
	} else {
		out = append(out, b.ring[b.next:]...)
		out = append(out, b.ring[:b.next]...)
	}
	if tail > 0 && len(out) > tail {
		out = out[len(out)-tail:]
	}
	return out
}

// Subscribe returns the kept history (up to tail) and a channel of every later event, with no gap and no
// duplicate between them. cancel must be called when done.
func (b *Bus) Subscribe(tail int) ([]Event, <-chan Event, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan Event, 256)
	b.subs[ch] = struct{}{}
	cancel := sync.OnceFunc(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
	})
	return b.history(tail), ch, cancel
}
