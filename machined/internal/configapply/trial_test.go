package configapply

import (
	"testing"
	"time"
)

// fakeTimers fires the timers a test asks for.
type fakeTimers struct{ fire []func() }

func (f *fakeTimers) after(_ time.Duration, fn func()) func() bool {
	i := len(f.fire)
	f.fire = append(f.fire, fn)
	return func() bool { f.fire[i] = func() {}; return true }
}

func TestTrial(t *testing.T) {
	timers := &fakeTimers{}
	tr := &Trial{AfterFunc: timers.after}
	reverted := 0
	revert := func() { reverted++ }

	// Not confirmed: the timeout reverts, and a late confirm finds nothing.
	tr.Start(time.Minute, revert)
	timers.fire[0]()
	if reverted != 1 {
		t.Fatalf("reverted %d times after the timeout, want 1", reverted)
	}
	if tr.Confirm() {
		t.Error("Confirm after the revert succeeded")
	}

	// Confirmed in time: the timer does nothing.
	tr.Start(time.Minute, revert)
	if !tr.Confirm() {
		t.Fatal("Confirm of a pending trial failed")
	}
	timers.fire[1]()
	if reverted != 1 {
		t.Errorf("a confirmed trial was reverted")
	}

	// A new trial replaces the pending one: only the new one reverts.
	tr.Start(time.Minute, revert)
	tr.Start(time.Minute, revert)
	timers.fire[2]()
	timers.fire[3]()
	if reverted != 2 {
		t.Errorf("reverted %d times, want 2 (the replaced trial must not revert)", reverted)
	}
}
