package workload

import (
	"fmt"
	"strings"
	"time"
)

// A control-plane component whose static pod was rewritten with a flag it refuses exits at once, and the
// kubelet starts it again and again with a growing back-off. Waiting out the apply's whole timeout for
// it says nothing more than its first runs do, and keeps the node's API down for as long; so the wait
// gives up once the kubelet has made crashLoopRuns containers of it since the rewrite and none runs.

// crashLoopRuns is how many new containers of a component the kubelet must have made, none of them
// running, before the wait calls it a crash loop. The kubelet makes a container again only once the one
// before it has ended, so three are two runs that ended, 10 s of back-off apart, and a third that is not
// running either: one transient failure at start (an etcd leader election under way) does not undo a
// good config. A container whose task containerd does not list has either ended or not started yet; the
// count does not need to tell which.
const crashLoopRuns = 3

// containerRun is one container of a component as containerd lists it.
type containerRun struct {
	ID      string
	Created time.Time
	Running bool   // its task runs
	State   string // what it is at when not running ("exited, status 1", "no running process")
}

// restartWatch follows the containers a component gets after its static pod was rewritten at since.
type restartWatch struct {
	component string
	since     time.Time
	// seen holds every new container ever listed: the kubelet prunes dead ones between polls.
	seen map[string]bool
}

func newRestartWatch(component string, since time.Time) *restartWatch {
	return &restartWatch{component: component, since: since, seen: map[string]bool{}}
}

// crashLoopError says a component's new containers keep ending.
type crashLoopError struct {
	Component string
	Runs      int    // new containers made since the rewrite
	Newest    string // the state of the newest
	Log       string // the line its log ended on (failureLine)
}

func (e *crashLoopError) Error() string {
	msg := fmt.Sprintf("crash loop: the kubelet made %d containers of %s since its manifest was rewritten and none runs (the newest: %s)",
		e.Runs, e.Component, e.Newest)
	if e.Log != "" {
		msg += "; its log: " + e.Log
	}
	return msg + fmt.Sprintf("; see cairnctl logs %s --previous", e.Component)
}

// Precondition marks the error for the API (FailedPrecondition): the node's component refuses to run,
// nothing in machined failed.
func (e *crashLoopError) Precondition() {}

// observe takes one listing of the component's containers. It returns nil once a container made after
// the rewrite runs, a *crashLoopError once crashLoopRuns of them were seen and none runs, and otherwise an
// error saying where the wait is.
func (w *restartWatch) observe(ctrs []containerRun) error {
	var newest *containerRun
	for i := range ctrs {
		c := &ctrs[i]
		if c.Created.Before(w.since) {
			continue
		}
		if c.Running {
			return nil
		}
		w.seen[c.ID] = true
		if newest == nil || c.Created.After(newest.Created) {
			newest = c
		}
	}
	switch {
	case len(w.seen) >= crashLoopRuns:
		state := "pruned by the kubelet"
		if newest != nil {
			state = newest.State
		}
		return &crashLoopError{Component: w.component, Runs: len(w.seen), Newest: state}
	case newest == nil && len(w.seen) == 0:
		return fmt.Errorf("the kubelet has not started it again yet")
	case newest == nil:
		return fmt.Errorf("not running: its new container ended and the kubelet has not made another yet")
	case len(w.seen) > 1:
		return fmt.Errorf("not running: the kubelet made %d containers of it since the rewrite; the newest: %s (see cairnctl logs %s --previous)",
			len(w.seen), newest.State, w.component)
	}
	return fmt.Errorf("not running: its new container: %s", newest.State)
}

// failureScan is how many lines at the end of a container's log failureLine looks through: a component
// refusing a flag prints its error and then its whole usage, some hundreds of lines.
const failureScan = 1000

// failureLine picks from a log's last lines the one that says why the program ended: the last error a
// Kubernetes component or cobra printed (klog's E and F lines, "Error: ..."), else the last line.
func failureLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "Error:") || strings.HasPrefix(l, "error:") || klogFailure(l) {
			return l
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// klogFailure reports whether a line is a klog error or fatal line: "E1202 19:35:40.123456 ...".
func klogFailure(l string) bool {
	if len(l) < 6 || (l[0] != 'E' && l[0] != 'F') {
		return false
	}
	for _, c := range l[1:5] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return l[5] == ' '
}
