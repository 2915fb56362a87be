package fsm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// want is the transition table written out again by hand, so a change to the table in code must be made
// twice, on purpose.
var want = map[[2]State]bool{
	{Boot, Init}: true, {Boot, Join}: true, {Boot, Running}: true, {Boot, Reboot}: true, {Boot, Shutdown}: true, {Boot, Reset}: true,
	{Init, Running}: true, {Init, Reboot}: true, {Init, Shutdown}: true, {Init, Reset}: true,
	{Join, Running}: true, {Join, Reboot}: true, {Join, Shutdown}: true, {Join, Reset}: true,
	{Running, Reboot}: true, {Running, Shutdown}: true, {Running, Reset}: true, {Running, Upgrade}: true,
	{Upgrade, Reboot}: true, {Upgrade, Running}: true, {Upgrade, Shutdown}: true,
	{Reset, Reboot}: true, {Reset, Shutdown}: true,
	{Reboot, Boot}: true, {Reboot, Shutdown}: true,
}

func TestEveryTransition(t *testing.T) {
	for _, from := range States() {
		for _, to := range States() {
			m := &Machine{state: from}
			err := m.Transition(to)
			if want[[2]State{from, to}] {
				if err != nil {
					t.Errorf("Transition(%s → %s) = %v, want allowed", from, to, err)
				}
				if got := m.State(); got != to {
					t.Errorf("after Transition(%s → %s): State() = %s", from, to, got)
				}
				continue
			}
			var te *TransitionError
			if !errors.As(err, &te) {
				t.Errorf("Transition(%s → %s) = %v, want *TransitionError", from, to, err)
				continue
			}
			if !strings.Contains(err.Error(), "state "+string(from)) {
				t.Errorf("Transition(%s → %s) error %q does not name the current state", from, to, err)
			}
			if got := m.State(); got != from {
				t.Errorf("refused Transition(%s → %s) changed the state to %s", from, to, got)
			}
		}
	}
}

func TestTransitionFromIsACompareAndSwap(t *testing.T) {
	m := New(nil)
	var wg sync.WaitGroup
	wins := make(chan State, 2)
	for _, to := range []State{Init, Join} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m.TransitionFrom([]State{Boot}, to) == nil {
				wins <- to
			}
		}()
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("%d transitions out of Boot succeeded, want exactly 1", n)
	}
}

func TestOnChangeSeesEveryTransition(t *testing.T) {
	var got []string
	m := New(func(from, to State) { got = append(got, string(from)+">"+string(to)) })
	for _, to := range []State{Init, Running, Reboot, Boot} {
		if err := m.Transition(to); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, " ") != "Boot>Init Init>Running Running>Reboot Reboot>Boot" {
		t.Errorf("onChange saw %v", got)
	}
}

func TestLockTakeover(t *testing.T) {
	tests := []struct {
		running, next Sequence
		takesOver     bool
	}{
		{SeqInit, SeqReboot, true},
		{SeqInit, SeqShutdown, true},
		{SeqInit, SeqReset, true},
		{SeqJoin, SeqReboot, true},
		{SeqStart, SeqReset, true},
		{SeqReboot, SeqShutdown, true},
		{SeqInit, SeqJoin, false},
		{SeqJoin, SeqInit, false},
		{SeqInit, SeqInit, false},
		{SeqShutdown, SeqReboot, false},
		{SeqShutdown, SeqReset, false},
		{SeqReboot, SeqReset, false},
		{SeqReset, SeqReboot, false},
		{SeqInit, SeqService, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.running)+"→"+string(tc.next), func(t *testing.T) {
			var l Lock
			bg := context.Background()
			runCtx, release1, err := l.Acquire(bg, bg, tc.running)
			if err != nil {
				t.Fatal(err)
			}
			// The running sequence releases when cancelled, as a real one does.
			go func() { <-runCtx.Done(); release1() }()
			ctx, cancel := context.WithTimeout(bg, 2*time.Second)
			defer cancel()
			_, release2, err := l.Acquire(ctx, bg, tc.next)
			if tc.takesOver {
				if err != nil {
					t.Fatalf("Acquire(%s) while %s runs = %v, want takeover", tc.next, tc.running, err)
				}
				if runCtx.Err() == nil {
					t.Errorf("%s was not cancelled by %s", tc.running, tc.next)
				}
				if got := l.Running(); got != tc.next {
					t.Errorf("Running() = %q, want %q", got, tc.next)
				}
				release2()
				return
			}
			var busy *BusyError
			if !errors.As(err, &busy) || busy.Running != tc.running {
				t.Fatalf("Acquire(%s) while %s runs = %v, want BusyError naming %s", tc.next, tc.running, err, tc.running)
			}
			if runCtx.Err() != nil {
				t.Errorf("%s was cancelled by a refused %s", tc.running, tc.next)
			}
			release1()
		})
	}
}

func TestLockReleaseFreesIt(t *testing.T) {
	var l Lock
	bg := context.Background()
	_, release, err := l.Acquire(bg, bg, SeqInit)
	if err != nil {
		t.Fatal(err)
	}
	release()
	release() // releasing twice is harmless
	if got := l.Running(); got != "" {
		t.Fatalf("Running() after release = %q", got)
	}
	if _, rel, err := l.Acquire(bg, bg, SeqJoin); err != nil {
		t.Fatalf("Acquire after release = %v", err)
	} else {
		rel()
	}
}
