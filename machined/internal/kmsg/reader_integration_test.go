//go:build integration

package kmsg

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/logring"
)

// TestDmesgFollowsTheHostDevice follows the host's /dev/kmsg, writes a record to it (as root may) and
// expects it back with a current time; then leaving must end the wait for the next record.
func TestDmesgFollowsTheHostDevice(t *testing.T) {
	w, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("cannot write the host's kernel log: %v", err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	lines := make(chan logring.Record, 100)
	done := make(chan error, 1)
	go func() {
		done <- (&Reader{Path: "/dev/kmsg", ProcRoot: "/proc"}).Dmesg(ctx, 1, true, func(l logring.Record) error {
			lines <- l
			return nil
		})
	}()
	time.Sleep(300 * time.Millisecond) // past the kept records
	mark := fmt.Sprintf("cairn-kmsg-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	if _, err := fmt.Fprintf(w, "<5>%s\n", mark); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for found := false; !found; {
		select {
		case l := <-lines:
			if strings.Contains(l.Line, mark) {
				found = true
				if !strings.HasPrefix(l.Line, "user.notice: ") || time.Since(l.Time).Abs() > 5*time.Second {
					t.Errorf("line %q at %v: want user.notice and about now", l.Line, l.Time)
				}
			}
		case <-deadline:
			t.Fatalf("the record %s written to /dev/kmsg never came", mark)
		}
	}
	cancel()
	waitFollowEnded(t, done)
}
