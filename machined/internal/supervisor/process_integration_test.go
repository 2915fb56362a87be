//go:build integration

package supervisor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/machined/internal/logring"
)

// TestProcessStartsInCgroup starts a service with Cgroup set on a cgroup v2 hierarchy mounted for the
// test, and reads the cgroup the kernel reports for the running process.
func TestProcessStartsInCgroup(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a cgroup v2 hierarchy")
	}
	root := t.TempDir()
	if out, err := exec.Command("mount", "-t", "cgroup2", "cgroup2", root).CombinedOutput(); err != nil {
		t.Skipf("this kernel cannot mount cgroup2: %v: %s", err, out)
	}
	group := filepath.Join(root, "cairn-test-"+filepath.Base(t.TempDir()))
	if err := os.Mkdir(group, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(group) // fails while a process is in it: the stop below comes first
		exec.Command("umount", root).Run()
	})

	ctx, cancel := context.WithCancel(context.Background())
	pids := make(chan int, 1)
	done := make(chan error, 1)
	p := &Process{Path: "/bin/sleep", Args: []string{"60"}, Cgroup: group}
	go func() { done <- p.Run(ctx, logring.New(), func(pid int) { pids <- pid }) }()
	var pid int
	select {
	case pid = <-pids:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	want := "0::/" + filepath.Base(group)
	if !strings.Contains(string(b), want) {
		t.Errorf("/proc/%d/cgroup = %q, want the line %q", pid, b, want)
	}
}

func TestProcessMissingCgroup(t *testing.T) {
	p := &Process{Path: "/bin/true", Cgroup: filepath.Join(t.TempDir(), "absent")}
	err := p.Run(context.Background(), logring.New(), func(int) {})
	if err == nil || !strings.Contains(err.Error(), "cgroup") {
		t.Fatalf("Run with a missing cgroup = %v, want an error naming the cgroup", err)
	}
}
