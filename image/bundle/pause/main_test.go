package main

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as pause itself, so the signal tests run
// the real main without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("CAIRN_PAUSE_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestRunStopsOnSignal(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		sigs := make(chan os.Signal, 3)
		reaps := 0
		sigs <- syscall.SIGCHLD
		sigs <- syscall.SIGCHLD
		sigs <- sig
		if code := run(sigs, func() int { reaps++; return 1 }); code != 0 {
			t.Errorf("run(%v) = %d, want 0", sig, code)
		}
		if reaps != 2 {
			t.Errorf("run(%v) reaped %d times, want 2 (once per SIGCHLD)", sig, reaps)
		}
	}
}

func TestReapAllCollectsZombies(t *testing.T) {
	var pids []int
	for range 3 {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
		if err != nil {
			t.Skipf("cannot start /bin/true: %v", err)
		}
		pids = append(pids, pid)
	}
	// Wait until all three are zombies (state Z) before reaping.
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for !isZombie(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("child %d never became a zombie", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n := reapAll(); n != 3 {
		t.Errorf("reapAll() = %d, want 3", n)
	}
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("child %d still in /proc after reapAll()", pid)
		}
	}
	if n := reapAll(); n != 0 {
		t.Errorf("second reapAll() = %d, want 0", n)
	}
}

func TestBinaryExitsZeroOnSIGTERM(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CAIRN_PAUSE_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Give main time to install its handlers; before that SIGTERM would kill
	// it with a signal status, which the check below reports.
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pause after SIGTERM: %v, want exit status 0", err)
		}
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause did not exit within 5s of SIGTERM")
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// Fields: pid (comm) state ...; comm may hold spaces, so find the last ')'.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] == 'Z'
		}
	}
	return false
}
