package node

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/sequence"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

// resetWorld records what a reset's hooks were asked to do, across the "power cut" between two nodes
// started on the same root. cut names the task that fails the first time it runs, as a power cut there
// would end the reset.
type resetWorld struct {
	mu    sync.Mutex
	cut   string
	ran   []string
	wiped [][]string
}

func (w *resetWorld) task(name string) sequence.Task {
	return sequence.Task{Name: name, Run: func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.ran = append(w.ran, name)
		if name == w.cut {
			w.cut = ""
			return errors.New("power cut")
		}
		return nil
	}}
}

func (w *resetWorld) hooks(o *Options) {
	o.Hooks.Drain = func() []sequence.Task { return []sequence.Task{w.task("cordon"), w.task("drain")} }
	o.Hooks.Leave = func() []sequence.Task { return []sequence.Task{w.task("leave-node"), w.task("etcd-leave")} }
	o.Hooks.Wipe = func(_ *config.MachineConfig, vols []string) []sequence.Task {
		return []sequence.Task{{Name: "wipe-volumes", Run: func(context.Context) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.wiped = append(w.wiped, vols)
			return nil
		}}}
	}
}

func (w *resetWorld) record() ([]string, [][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ran...), append([][]string(nil), w.wiped...)
}

// A graceful reset cut short (a power cut, here a failing task) leaves its record in the node lock; the
// next boot carries it on instead of leaving the node Running but cordoned, or locked but out of etcd.
func TestInterruptedResetIsCarriedOn(t *testing.T) {
	for _, tc := range []struct {
		name, cut string
		// after the second boot: the tasks run in all, and the volumes wiped
		wantRan   []string
		wantWiped [][]string
	}{{
		// Nothing cannot be undone yet: the node comes back Running and the whole graceful reset runs
		// again, so its cluster sees it leave.
		name: "cut while draining", cut: "drain",
		wantRan:   []string{"cordon", "drain", "cordon", "drain", "leave-node", "etcd-leave"},
		wantWiped: [][]string{{"etcd", "state"}},
	}, {
		// The node had begun to leave: it must not come back as a member; the reset finishes from Boot.
		name: "cut while leaving etcd", cut: "etcd-leave",
		wantRan:   []string{"cordon", "drain", "leave-node", "etcd-leave"},
		wantWiped: [][]string{{"etcd", "state"}},
	}, {
		// Cut in the wipe: STATE, which holds the record, is wiped last, so the wipe runs again.
		name: "cut while wiping", cut: "wipe-volumes",
		wantRan:   []string{"cordon", "drain", "leave-node", "etcd-leave"},
		wantWiped: [][]string{{"etcd", "state"}, {"etcd", "state"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := testcluster.New(t)
			root := t.TempDir()
			w := &resetWorld{cut: tc.cut}
			first := start(t, root, w.hooks)
			if tc.cut == "wipe-volumes" {
				first.o.Hooks.Wipe = w.cutWipe(first.o.Hooks.Wipe)
			}
			if err := first.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
				t.Fatal(err)
			}
			waitState(t, first.Node, fsm.Running)
			if err := first.Reset(context.Background(), ResetOptions{Wipe: []string{"state", "etcd"}, Graceful: true}); err != nil {
				t.Fatal(err)
			}
			waitState(t, first.Node, fsm.Reset)
			if first.Status().LastError == "" {
				t.Fatal("the cut reset reports no error")
			}
			if r := first.lock.Record(); r == nil || r.Reset == nil {
				t.Fatalf("lock after the cut = %+v, want the reset recorded", r)
			}

			second := start(t, root, w.hooks) // the power comes back
			waitState(t, second.Node, fsm.Boot)
			waitIdle(second.Node)
			if st := second.Status(); st.LockedBy != "" || st.State != fsm.Boot {
				t.Errorf("after the second boot: state %s, locked by %q (last error %q); want Boot, free", st.State, st.LockedBy, st.LastError)
			}
			ran, wiped := w.record()
			if diff := cmp.Diff(tc.wantRan, ran); diff != "" {
				t.Errorf("reset tasks run (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWiped, wiped); diff != "" {
				t.Errorf("volumes wiped (-want +got):\n%s", diff)
			}
		})
	}
}

// cutWipe makes the first wipe fail after it recorded what it was asked.
func (w *resetWorld) cutWipe(wipe func(*config.MachineConfig, []string) []sequence.Task) func(*config.MachineConfig, []string) []sequence.Task {
	return func(c *config.MachineConfig, vols []string) []sequence.Task {
		tasks := wipe(c, vols)
		run := tasks[0].Run
		tasks[0].Run = func(ctx context.Context) error {
			if err := run(ctx); err != nil {
				return err
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.cut == "wipe-volumes" {
				w.cut = ""
				return errors.New("power cut")
			}
			return nil
		}
		return tasks
	}
}

func TestStateLast(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"state", "ephemeral"}, []string{"ephemeral", "state"}},
		{[]string{"etcd", "state", "ephemeral"}, []string{"etcd", "ephemeral", "state"}},
		{[]string{"ephemeral"}, []string{"ephemeral"}},
	} {
		if got := stateLast(tc.in); !cmp.Equal(got, tc.want) {
			t.Errorf("stateLast(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
