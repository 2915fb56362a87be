package sys

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// niceOf is the nice value of the calling thread. getpriority(2) returns 20 - nice, to stay positive.
func niceOf() int {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		return -100
	}
	return 20 - p
}

// Only the background goroutine's own thread is lowered; the others keep their priority.
func TestBackgroundThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := niceOf()
	got, hurried, done := make(chan int), make(chan struct{}), make(chan int)
	go func() {
		tid, err := BackgroundThread()
		if err != nil || tid != unix.Gettid() {
			t.Errorf("BackgroundThread = %d, %v; want this thread (%d)", tid, err, unix.Gettid())
		}
		got <- niceOf()
		got <- tid
		<-hurried
		done <- niceOf()
	}()
	if n := <-got; n != 19 {
		t.Errorf("nice of the background thread = %d, want 19", n)
	}
	if n := niceOf(); n != before {
		t.Errorf("nice of another thread = %d, want it unchanged (%d)", n, before)
	}
	// Raising a thread's priority back needs CAP_SYS_NICE (machined is root).
	if err := Hurry(<-got); err != nil && unix.Geteuid() == 0 {
		t.Errorf("Hurry: %v", err)
	}
	close(hurried)
	if n := <-done; unix.Geteuid() == 0 && n != 0 {
		t.Errorf("nice of the hurried thread = %d, want 0", n)
	}
}
