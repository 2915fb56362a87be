//go:build integration

package sys

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReaperAsPID1 re-runs this test binary as PID 1 of a new PID namespace, where it starts the reaper,
// runs a service through it, and makes a shell leave an orphan behind; the orphan, re-parented to PID 1,
// must be reaped (no zombie left), and the service's exit must reach its waiter and nobody else.
func TestReaperAsPID1(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	if os.Getenv("CAIRN_REAPER_CHILD") == "1" {
		os.Exit(reaperChild())
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperAsPID1$")
	cmd.Env = append(os.Environ(), "CAIRN_REAPER_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("PID-1 child failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func reaperChild() int {
	if os.Getpid() != 1 {
		fmt.Println("not PID 1 in the new namespace")
		return 1
	}
	orphans := make(chan int, 4)
	r := NewReaper(func(pid int, _ unix.WaitStatus) { orphans <- pid })

	svc := exec.Command("/bin/sh", "-c", "exit 7")
	exit, err := r.Start(svc)
	if err != nil {
		fmt.Println("start service:", err)
		return 1
	}
	select {
	case e := <-exit:
		if e.Err() == nil || e.Status.ExitStatus() != 7 {
			fmt.Println("service exit =", e.Err())
			return 1
		}
	case <-time.After(5 * time.Second):
		fmt.Println("service exit never delivered")
		return 1
	}

	// The shell starts a sleep in the background and exits: the sleep is orphaned to PID 1.
	out, err := exec.Command("/bin/sh", "-c", "sleep 0.3 & echo $!").Output()
	if err != nil {
		// exec's own Wait may lose the race to the reaper: that is why services go through Start.
		fmt.Println("(shell wait:", err, ")")
	}
	orphan, _ := strconv.Atoi(string(out[:len(out)-1]))
	deadline := time.After(5 * time.Second)
	for {
		select {
		case pid := <-orphans:
			if pid != orphan {
				continue // the shell itself, reaped before exec's Wait got to it
			}
			if err := unix.Kill(orphan, 0); err != unix.ESRCH {
				fmt.Printf("orphan %d still exists after reaping: %v\n", orphan, err)
				return 1
			}
			fmt.Printf("orphan %d reaped by PID 1\n", orphan)
			return 0
		case <-deadline:
			fmt.Printf("orphan %d was not reaped\n", orphan)
			return 1
		}
	}
}
