package workload

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRestartWatch(t *testing.T) {
	since := time.Date(2026, 12, 2, 19, 35, 0, 0, time.UTC)
	old := containerRun{ID: "old", Created: since.Add(-time.Hour), Running: true, State: "running"}
	ended := func(id string, after time.Duration) containerRun {
		return containerRun{ID: id, Created: since.Add(after), State: "no running process"}
	}
	for _, c := range []struct {
		name  string
		polls [][]containerRun // one listing per poll; the last one's result is checked
		want  string           // "" for nil, else a part of the error
		loop  bool             // want a *crashLoopError
	}{
		{name: "only the old container, still running", polls: [][]containerRun{{old}}, want: "has not started it again yet"},
		{name: "new one runs", polls: [][]containerRun{{old, {ID: "a", Created: since.Add(time.Second), Running: true}}}},
		{name: "new one starting", polls: [][]containerRun{{ended("a", time.Second)}}, want: "its new container: no running process"},
		{name: "runs after one failed start", polls: [][]containerRun{
			{ended("a", time.Second)},
			{ended("a", time.Second), {ID: "b", Created: since.Add(15 * time.Second), Running: true}},
		}},
		{name: "two made, none runs", polls: [][]containerRun{{ended("a", time.Second), ended("b", 15*time.Second)}}, want: "made 2 containers"},
		{name: "three made, none runs", polls: [][]containerRun{{ended("a", time.Second), ended("b", 15*time.Second), ended("c", 40*time.Second)}}, loop: true},
		{name: "three across polls, dead ones pruned between", polls: [][]containerRun{
			{ended("a", time.Second)},
			{ended("b", 15*time.Second)},
			{ended("c", 40*time.Second)},
		}, loop: true},
		{name: "ended and pruned, none new yet", polls: [][]containerRun{{ended("a", time.Second)}, {old}}, want: "has not made another yet"},
		{name: "third one runs", polls: [][]containerRun{
			{ended("a", time.Second), ended("b", 15*time.Second)},
			{ended("a", time.Second), ended("b", 15*time.Second), {ID: "c", Created: since.Add(40 * time.Second), Running: true}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newRestartWatch("kube-apiserver", since)
			var err error
			for _, p := range c.polls {
				err = w.observe(p)
			}
			var loop *crashLoopError
			switch {
			case c.loop:
				if !errors.As(err, &loop) {
					t.Fatalf("observe() = %v, want a crash loop", err)
				}
			case c.want == "":
				if err != nil {
					t.Fatalf("observe() = %v, want nil", err)
				}
			case err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &loop):
				t.Fatalf("observe() = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestCrashLoopError(t *testing.T) {
	err := &crashLoopError{Component: "kube-apiserver", Runs: 3, Newest: "no running process", Log: "Error: unknown flag: --cairn-no-such-flag"}
	got := err.Error()
	for _, want := range []string{"crash loop", "3 containers of kube-apiserver", "Error: unknown flag: --cairn-no-such-flag", "cairnctl logs kube-apiserver --previous"} {
		if !strings.Contains(got, want) {
			t.Errorf("Error() = %q, want it to contain %q", got, want)
		}
	}
}

func TestFailureLine(t *testing.T) {
	usage := []string{"Error: unknown flag: --cairn-no-such-flag", "Usage:", "  kube-apiserver [flags]", "", "Generic flags:", "      --advertise-address ip"}
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{name: "cobra's error before the usage", lines: usage, want: "Error: unknown flag: --cairn-no-such-flag"},
		{name: "klog's fatal line", lines: []string{
			"I1202 19:35:40.100000       1 server.go:150] Version: v1.37.2",
			"E1202 19:35:41.000000       1 run.go:72] \"command failed\" err=\"open /etc/kubernetes/pki/apiserver.crt: no such file\"",
			"I1202 19:35:41.000100       1 trace.go:236] shutting down",
		}, want: "E1202 19:35:41.000000       1 run.go:72] \"command failed\" err=\"open /etc/kubernetes/pki/apiserver.crt: no such file\""},
		{name: "no error line: the last", lines: []string{"starting", "  stopped  "}, want: "stopped"},
		{name: "an Exxxx word is not klog's", lines: []string{"E12 happened", "last"}, want: "last"},
		{name: "empty", lines: nil, want: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := failureLine(c.lines); got != c.want {
				t.Errorf("failureLine() = %q, want %q", got, c.want)
			}
		})
	}
}
