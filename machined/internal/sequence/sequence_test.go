package sequence

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/events"
)

type memProgress struct{ done []string }

func (m *memProgress) IsDone(t string) bool    { return slices.Contains(m.done, t) }
func (m *memProgress) MarkDone(t string) error { m.done = append(m.done, t); return nil }
func outcomes(b *events.Bus) (out []string) {
	for _, e := range b.History(0) {
		out = append(out, e.Task+":"+e.Outcome)
	}
	return out
}

func TestOnceTasksAreSkippedWhenDone(t *testing.T) {
	ran := map[string]int{}
	task := func(name string, once bool) Task {
		return Task{Name: name, Once: once, Run: func(context.Context) error { ran[name]++; return nil }}
	}
	p := &memProgress{}
	tasks := []Task{task("format", true), task("mount", false)}
	for i := 0; i < 2; i++ {
		r := &Runner{Bus: events.NewBus(nil, nil), Progress: p}
		if err := r.Run(context.Background(), "init", tasks); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			want := "format:skipped mount:started mount:done"
			if got := strings.Join(outcomes(r.Bus), " "); got != want {
				t.Errorf("second pass events = %q, want %q", got, want)
			}
		}
	}
	if ran["format"] != 1 || ran["mount"] != 2 {
		t.Errorf("runs = %v, want format once and mount on every pass", ran)
	}
}

func TestFailureStopsTheSequenceAndNamesTheTask(t *testing.T) {
	r := &Runner{Bus: events.NewBus(nil, nil), Progress: &memProgress{}}
	after := false
	err := r.Run(context.Background(), "init", []Task{
		{Name: "bad", Once: true, Run: func(context.Context) error { return errors.New("disk on fire") }},
		{Name: "after", Run: func(context.Context) error { after = true; return nil }},
	})
	var te *TaskError
	if !errors.As(err, &te) || te.Task != "bad" || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Run() = %v, want a TaskError naming task bad", err)
	}
	if after {
		t.Error("a task after the failed one ran")
	}
	if r.Progress.IsDone("bad") {
		t.Error("a failed once-only task was recorded as done")
	}
	h := r.Bus.History(0)
	if last := h[len(h)-1]; last.Outcome != events.Failed || last.Error != "disk on fire" {
		t.Errorf("last event = %+v, want the failure with its error", last)
	}
}

func TestTimeoutAndPanic(t *testing.T) {
	r := &Runner{Bus: events.NewBus(nil, nil)}
	err := r.Run(context.Background(), "s", []Task{{Name: "slow", Timeout: 20 * time.Millisecond, Run: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}})
	if err == nil || !strings.Contains(err.Error(), "timed out after 20ms") {
		t.Errorf("slow task: Run() = %v, want a timeout naming the limit", err)
	}
	err = r.Run(context.Background(), "s", []Task{{Name: "buggy", Run: func(context.Context) error { panic("oops") }}})
	if err == nil || !strings.Contains(err.Error(), "panic: oops") {
		t.Errorf("panicking task: Run() = %v, want the panic as an error", err)
	}
}

func TestCancelledContextStopsBeforeTheNextTask(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &Runner{Bus: events.NewBus(nil, nil)}
	second := false
	err := r.Run(ctx, "init", []Task{
		{Name: "first", Run: func(context.Context) error { cancel(errors.New("reboot takes over")); return nil }},
		{Name: "second", Run: func(context.Context) error { second = true; return nil }},
	})
	if second || err == nil || !strings.Contains(err.Error(), "reboot takes over") {
		t.Fatalf("Run() = %v (second ran: %v), want it stopped with the cause", err, second)
	}
}
