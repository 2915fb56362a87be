// Command pause is the pod sandbox process: it holds the pod's namespaces
// open, reaps the zombies that get reparented to it as the pod's PID 1, and
// exits 0 on SIGTERM or SIGINT so a pod stops promptly.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(run(sigs, reapAll))
}

// run waits for signals until told to stop; reap is called for every
// SIGCHLD. It returns the exit code.
func run(sigs <-chan os.Signal, reap func() int) int {
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		return 0
	}
	return 0
}

// reapAll collects every exited child without blocking and returns how many
// it collected. Signals coalesce, so one SIGCHLD may stand for many exits.
func reapAll() int {
	n := 0
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return n
		}
		n++
	}
}
