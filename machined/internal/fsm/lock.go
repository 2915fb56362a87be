package fsm

import (
	"context"
	"fmt"
	"sync"
)

// Sequence names. A sequence is a list of tasks run for one request (see package sequence).
type Sequence string

const (
	SeqBoot     Sequence = "boot"
	SeqInit     Sequence = "init"
	SeqJoin     Sequence = "join"
	SeqStart    Sequence = "start" // the Running path of a configured node: mount, start services
	SeqReboot   Sequence = "reboot"
	SeqShutdown Sequence = "shutdown"
	SeqReset    Sequence = "reset"
	SeqUpgrade  Sequence = "upgrade"
	SeqInstall  Sequence = "install" // writing Cairn onto a disk from the live medium
	SeqService  Sequence = "service" // start/stop/restart of one service
	SeqApply    Sequence = "apply"   // a changed config applied to a Running node (cairnctl apply)
)

// takeover says which running sequences a new one may cancel. A request for a sequence not listed against
// the running one gets BusyError (the API's Aborted). Power operations win over configuration work, so an
// operator can always get a stuck node back; nothing cancels a shutdown.
var takeover = map[Sequence][]Sequence{
	SeqReboot:   {SeqBoot, SeqInit, SeqJoin, SeqStart, SeqUpgrade, SeqInstall, SeqService, SeqApply},
	SeqShutdown: {SeqBoot, SeqInit, SeqJoin, SeqStart, SeqUpgrade, SeqInstall, SeqService, SeqReboot, SeqReset, SeqApply},
	SeqReset:    {SeqBoot, SeqInit, SeqJoin, SeqStart, SeqService, SeqApply},
}

// CanTakeOver reports whether a request for next may cancel running.
func CanTakeOver(next, running Sequence) bool {
	for _, s := range takeover[next] {
		if s == running {
			return true
		}
	}
	return false
}

// BusyError says another sequence holds the lock; the API maps it to Aborted.
type BusyError struct {
	Running, Requested Sequence
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("sequence %q is running; %q must wait until it ends", e.Running, e.Requested)
}

// Lock lets one sequence run at a time.
type Lock struct {
	mu  sync.Mutex
	cur *holder
}

type holder struct {
	seq    Sequence
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// Acquire takes the lock for seq. If another sequence holds it and seq may take over, the other is
// cancelled and Acquire waits (bounded by ctx) for it to release. The returned context is cancelled when a
// later sequence takes over; release must be called when the sequence ends.
func (l *Lock) Acquire(ctx context.Context, parent context.Context, seq Sequence) (context.Context, func(), error) {
	for {
		l.mu.Lock()
		cur := l.cur
		if cur == nil {
			runCtx, cancel := context.WithCancelCause(parent)
			h := &holder{seq: seq, cancel: cancel, done: make(chan struct{})}
			l.cur = h
			l.mu.Unlock()
			release := sync.OnceFunc(func() {
				l.mu.Lock()
				if l.cur == h {
					l.cur = nil
				}
				l.mu.Unlock()
				cancel(nil)
				close(h.done)
			})
			return runCtx, release, nil
		}
		l.mu.Unlock()
		if !CanTakeOver(seq, cur.seq) {
			return nil, nil, &BusyError{Running: cur.seq, Requested: seq}
		}
		cur.cancel(fmt.Errorf("cancelled: %s takes over", seq))
		select {
		case <-cur.done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// Running names the sequence holding the lock, or "".
func (l *Lock) Running() Sequence {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		return ""
	}
	return l.cur.seq
}
