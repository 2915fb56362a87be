// Package timesync keeps the node's clock right with SNTP (RFC 4330): it asks the configured servers in
// order, steps the clock when it is off by more than StepThreshold, and reports what it did. etcd's
// leases, every certificate's validity and the join tokens' expiry all read this clock.
package timesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/beevik/ntp"
)

// StepThreshold is the offset below which the clock is left alone: SNTP over a LAN answers to a few
// milliseconds, and a step is a jump every process sees.
const StepThreshold = 100 * time.Millisecond

// Poll intervals: the first answers come quickly, then the client settles to asking every few minutes;
// after a failure it retries sooner than that.
const (
	pollMin = 32 * time.Second
	pollMax = 17 * time.Minute
)

// Answer is what a server said: how far the local clock is off, and how long the exchange took.
type Answer struct {
	Offset time.Duration
	RTT    time.Duration
}

// Query asks one server ("host" or "host:port").
type Query func(ctx context.Context, server string) (Answer, error)

// State is the clock's state for status.
type State struct {
	Servers  []string
	Synced   bool          // a server answered at least once
	Server   string        // the server of the last answer
	Offset   time.Duration // the last answer's offset (before the step, when there was one)
	LastSync time.Time
	Steps    int    // how many times the clock was stepped
	LastErr  string // the last failure, if the last round failed
}

// Syncer keeps the clock synced from Servers.
type Syncer struct {
	Servers []string
	Query   Query                            // SNTP by default
	Step    func(offset time.Duration) error // moves the system clock
	Now     func() time.Time
	Log     *slog.Logger

	mu     sync.Mutex
	st     State
	synced chan struct{} // closed at the first answer
	once   sync.Once
}

func (s *Syncer) init() {
	s.once.Do(func() {
		s.synced = make(chan struct{})
		if s.Query == nil {
			s.Query = SNTP
		}
		if s.Now == nil {
			s.Now = time.Now
		}
		s.st.Servers = append([]string(nil), s.Servers...)
	})
}

// Run syncs until ctx ends.
func (s *Syncer) Run(ctx context.Context) {
	s.init()
	poll := pollMin
	for {
		wait := poll
		if err := s.SyncOnce(ctx); err != nil {
			wait = pollMin
			s.Log.Warn("time: no server answered", "error", err, "retry", wait)
		} else {
			poll = min(2*poll, pollMax)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// SyncOnce asks the servers in order until one answers, and steps the clock if it is off.
func (s *Syncer) SyncOnce(ctx context.Context) error {
	s.init()
	if len(s.Servers) == 0 {
		return errors.New("no time servers configured (machine.time.servers)")
	}
	var errs []error
	for _, srv := range s.Servers {
		a, err := s.Query(ctx, srv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", srv, err))
			continue
		}
		stepped := false
		if a.Offset > StepThreshold || a.Offset < -StepThreshold {
			if err := s.Step(a.Offset); err != nil {
				errs = append(errs, err)
				break
			}
			stepped = true
			s.Log.Info("time: clock stepped", "server", srv, "offset", a.Offset, "rtt", a.RTT)
		}
		s.mu.Lock()
		s.st.Synced, s.st.Server, s.st.Offset, s.st.LastSync, s.st.LastErr = true, srv, a.Offset, s.Now(), ""
		if stepped {
			s.st.Steps++
		}
		s.mu.Unlock()
		select {
		case <-s.synced:
		default:
			close(s.synced)
			s.Log.Info("time: synced", "server", srv, "offset", a.Offset, "rtt", a.RTT)
		}
		return nil
	}
	err := errors.Join(errs...)
	s.mu.Lock()
	s.st.LastErr = err.Error()
	s.mu.Unlock()
	return err
}

// WaitSynced returns once a server has answered, or after wait with an error that says what failed.
func (s *Syncer) WaitSynced(ctx context.Context, wait time.Duration) error {
	s.init()
	select {
	case <-s.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		st := s.State()
		return fmt.Errorf("no time server answered within %v (%s)", wait, st.LastErr)
	}
}

// State reports the clock's state.
func (s *Syncer) State() State {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Servers = append([]string(nil), s.st.Servers...)
	return st
}

// SNTP asks server with one NTPv4 exchange, and refuses an answer that is not usable (a kiss-of-death, an
// unsynchronised server, a stratum out of range).
func SNTP(ctx context.Context, server string) (Answer, error) {
	timeout := 3 * time.Second
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	host := server
	if _, _, err := net.SplitHostPort(server); err != nil {
		host = net.JoinHostPort(server, "123")
	}
	r, err := ntp.QueryWithOptions(host, ntp.QueryOptions{Timeout: timeout})
	if err != nil {
		return Answer{}, err
	}
	if err := r.Validate(); err != nil {
		return Answer{}, err
	}
	return Answer{Offset: r.ClockOffset, RTT: r.RTT}, nil
}
