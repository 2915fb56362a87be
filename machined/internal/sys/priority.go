package sys

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// BackgroundThread gives the calling goroutine an OS thread of its own at the lowest CPU priority (nice
// 19), for work nobody waits on yet: on a one-CPU machine it then takes only the time the API leaves
// idle. Work the kernel does on the thread's behalf (reading and linking a module in finit_module)
// counts as the thread's. It returns the thread's ID, for Hurry. The goroutine must end without
// unlocking: Go then discards the thread instead of handing its low priority to other goroutines.
func BackgroundThread() (tid int, err error) {
	runtime.LockOSThread()
	tid = unix.Gettid()
	return tid, unix.Setpriority(unix.PRIO_PROCESS, tid, 19)
}

// Hurry gives a thread made by BackgroundThread the normal priority back, once something waits for its
// work: a waiter at normal priority must not wait for a thread that only gets idle time.
func Hurry(tid int) error {
	return unix.Setpriority(unix.PRIO_PROCESS, tid, 0)
}
