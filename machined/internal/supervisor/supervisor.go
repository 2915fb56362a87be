package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/logring"
)

// Runner runs a service once: it returns when the service ends, or stops it and returns when ctx ends.
// It calls started with the process ID (0 if none) once the service runs.
type Runner interface {
	Run(ctx context.Context, log *logring.Ring, started func(pid int)) error
}

// Service is a supervised service.
type Service struct {
	Name   string
	Runner Runner
	// Health probes the running service; nil means a running service is healthy.
	Health         func(ctx context.Context) error
	HealthInterval time.Duration
}

// Backoff bounds between restarts of a crashed service; a service that ran for ResetAfter starts the
// count over.
const (
	BackoffMin = time.Second
	BackoffMax = 30 * time.Second
	ResetAfter = time.Minute
)

// Supervisor runs services and restarts them when they end.
type Supervisor struct {
	Bus *events.Bus
	Log *slog.Logger

	mu       sync.Mutex
	services map[string]*handle
	static   map[string]func() Info
	logs     map[string]*logring.Ring
}

type handle struct {
	svc    Service
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	info Info
}

// New returns a supervisor with no services.
func New(bus *events.Bus, log *slog.Logger) *Supervisor {
	return &Supervisor{Bus: bus, Log: log, services: map[string]*handle{}, static: map[string]func() Info{}, logs: map[string]*logring.Ring{}}
}

// Register lists a service the supervisor does not run (machined itself) with its own report.
func (s *Supervisor) Register(name string, info func() Info) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.static[name] = info
}

// Logs returns the log ring of a service, creating it on first use, so logs written before a service is
// started (or by machined itself) have a home.
func (s *Supervisor) Logs(name string) *logring.Ring {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.logs[name]
	if !ok {
		r = logring.New()
		s.logs[name] = r
	}
	return r
}

// HasLogs reports whether a service of that name has a log.
func (s *Supervisor) HasLogs(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.logs[name]
	return ok
}

// Start supervises a service; starting one that already runs is a no-op.
func (s *Supervisor) Start(svc Service) {
	s.mu.Lock()
	if h, ok := s.services[svc.Name]; ok {
		select {
		case <-h.done:
		default:
			s.mu.Unlock()
			return
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &handle{svc: svc, cancel: cancel, done: make(chan struct{}), info: Info{Name: svc.Name, State: StateStarting, Health: Unknown}}
	s.services[svc.Name] = h
	s.mu.Unlock()
	log := s.Logs(svc.Name)
	go s.loop(ctx, h, log)
	if svc.Health != nil {
		go s.probe(ctx, h)
	}
}

// ErrUnknown is returned for a service the node does not have.
var ErrUnknown = errors.New("no such service")

// Stop stops a service and waits for it to end (bounded by ctx).
func (s *Supervisor) Stop(ctx context.Context, name string) error {
	s.mu.Lock()
	h, ok := s.services[name]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknown, name)
	}
	h.cancel()
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop %s: %w", name, ctx.Err())
	}
}

// StopAll stops every service, in the reverse order of the list given (dependents first), then the rest.
func (s *Supervisor) StopAll(ctx context.Context, order ...string) error {
	var errs []error
	stopped := map[string]bool{}
	for i := len(order) - 1; i >= 0; i-- {
		if err := s.Stop(ctx, order[i]); err != nil && !errors.Is(err, ErrUnknown) {
			errs = append(errs, err)
		}
		stopped[order[i]] = true
	}
	s.mu.Lock()
	var rest []string
	for name := range s.services {
		if !stopped[name] {
			rest = append(rest, name)
		}
	}
	s.mu.Unlock()
	for _, name := range rest {
		if err := s.Stop(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Service returns the definition of a supervised service, to start it again after a Stop.
func (s *Supervisor) Service(name string) (Service, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.services[name]
	if !ok {
		return Service{}, false
	}
	return h.svc, true
}

// Info reports one service.
func (s *Supervisor) Info(name string) (Info, bool) {
	for _, i := range s.List() {
		if i.Name == name {
			return i, true
		}
	}
	return Info{}, false
}

// List reports every service, sorted by name.
func (s *Supervisor) List() []Info {
	s.mu.Lock()
	var out []Info
	for _, f := range s.static {
		out = append(out, f())
	}
	for _, h := range s.services {
		h.mu.Lock()
		out = append(out, h.info)
		h.mu.Unlock()
	}
	s.mu.Unlock()
	sortInfos(out)
	return out
}

func (s *Supervisor) loop(ctx context.Context, h *handle, log *logring.Ring) {
	defer close(h.done)
	delay := BackoffMin
	for {
		start := time.Now()
		s.event(h, "started", "")
		err := h.svc.Runner.Run(ctx, log, func(pid int) {
			h.set(func(i *Info) { i.State, i.PID, i.Since = StateRunning, pid, time.Now() })
		})
		if ctx.Err() != nil {
			h.set(func(i *Info) { i.State, i.PID, i.Health, i.Since = StateStopped, 0, Unknown, time.Now() })
			s.event(h, "stopped", "")
			return
		}
		if err == nil {
			err = errors.New("exited")
		}
		if time.Since(start) > ResetAfter {
			delay = BackoffMin
		}
		h.set(func(i *Info) {
			i.State, i.PID, i.Health, i.LastError, i.Since = StateBackoff, 0, Unhealthy, err.Error(), time.Now()
			i.Restarts++
		})
		s.event(h, "crashed", fmt.Sprintf("%v; restarting in %s", err, delay))
		select {
		case <-ctx.Done():
			h.set(func(i *Info) { i.State = StateStopped })
			s.event(h, "stopped", "")
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, BackoffMax)
	}
}

func (s *Supervisor) probe(ctx context.Context, h *handle) {
	every := h.svc.HealthInterval
	if every == 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := Unknown
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		running := h.info.State == StateRunning
		h.mu.Unlock()
		if !running {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := h.svc.Health(pctx)
		cancel()
		health := Healthy
		if err != nil {
			health = Unhealthy
		}
		h.set(func(i *Info) {
			i.Health = health
			switch {
			case err != nil:
				i.LastError = "health: " + err.Error()
			case strings.HasPrefix(i.LastError, "health: "):
				i.LastError = "" // recovered: a stale probe failure would only mislead
			}
		})
		if health != last {
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			s.event(h, health, msg)
			last = health
		}
	}
}

func (h *handle) set(f func(*Info)) {
	h.mu.Lock()
	f(&h.info)
	h.mu.Unlock()
}

func (s *Supervisor) event(h *handle, outcome, msg string) {
	if s.Bus != nil {
		s.Bus.Publish(events.Event{Kind: events.KindService, Task: h.svc.Name, Outcome: outcome, Message: msg})
	}
	if s.Log != nil {
		s.Log.Info("service", "service", h.svc.Name, "outcome", outcome, "note", msg)
	}
}
