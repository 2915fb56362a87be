// Package fsm holds the node's state machine: its states, the one table of allowed transitions, and the
// priority lock that lets one sequence run at a time. It is pure: no I/O, no goroutines of its own.
package fsm

import (
	"fmt"
	"slices"
	"sync"
)

// State is where the node is in its life.
type State string

// States. Boot, Init, Join and Running are the life of a node; the others are operations on it.
const (
	Boot     State = "Boot"
	Init     State = "Init"
	Join     State = "Join"
	Running  State = "Running"
	Reboot   State = "Reboot"
	Shutdown State = "Shutdown"
	Reset    State = "Reset"
	Upgrade  State = "Upgrade"
)

// transitions is the one table of every allowed move. Nothing else changes the state.
//
// Boot goes to Running directly when the node lock shows a finished Init or Join (a reboot of a
// configured node). Init and Join stay where they are when a task fails: the lock is held, so the way out
// is a Reboot (which resumes the sequence) or a Reset.
var transitions = map[State][]State{
	Boot:     {Init, Join, Running, Reboot, Shutdown, Reset},
	Init:     {Running, Reboot, Shutdown, Reset},
	Join:     {Running, Reboot, Shutdown, Reset},
	Running:  {Reboot, Shutdown, Reset, Upgrade},
	Upgrade:  {Reboot, Running, Shutdown},
	Reset:    {Reboot, Shutdown},
	Reboot:   {Boot, Shutdown},
	Shutdown: {},
}

// States lists every state, in the table's order of a node's life.
func States() []State {
	return []State{Boot, Init, Join, Running, Upgrade, Reset, Reboot, Shutdown}
}

// Allowed reports whether the table permits from → to.
func Allowed(from, to State) bool { return slices.Contains(transitions[from], to) }

// TransitionError is a refused transition; the API maps it to FailedPrecondition.
type TransitionError struct {
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("the node is in state %s; %s is not possible from there", e.From, e.To)
}

// Machine holds the current state.
type Machine struct {
	mu    sync.Mutex
	state State
	// onChange is called with the lock held, in order, for every transition.
	onChange func(from, to State)
}

// New returns a machine in Boot. onChange may be nil.
func New(onChange func(from, to State)) *Machine {
	return &Machine{state: Boot, onChange: onChange}
}

// State returns the current state.
func (m *Machine) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// Transition moves to the given state if the table allows it.
func (m *Machine) Transition(to State) error {
	return m.TransitionFrom(nil, to)
}

// TransitionFrom moves to the given state only if the current state is one of from (any, when from is
// nil) and the table allows it: a compare-and-swap, so two racing callers cannot both move the node.
func (m *Machine) TransitionFrom(from []State, to State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if (from != nil && !slices.Contains(from, m.state)) || !Allowed(m.state, to) {
		return &TransitionError{From: m.state, To: to}
	}
	prev := m.state
	m.state = to
	if m.onChange != nil {
		m.onChange(prev, to)
	}
	return nil
}
