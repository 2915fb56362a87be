package cmd

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
)

// healthNode is a fake node that gives its Health answers in turn, repeating the last one.
type healthNode struct {
	machine.UnimplementedMachineServer
	answers []healthAnswer

	mu    sync.Mutex
	calls int
}

type healthAnswer struct {
	r   *machine.HealthResponse
	err error
}

func (n *healthNode) Health(context.Context, *machine.HealthRequest) (*machine.HealthResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := n.answers[min(n.calls, len(n.answers)-1)]
	n.calls++
	return a.r, a.err
}

func TestHealth(t *testing.T) {
	etcd := &machine.HealthCheck{Name: "etcd", Ok: true, Message: "healthy"}
	starting := healthAnswer{r: &machine.HealthResponse{Checks: []*machine.HealthCheck{etcd,
		{Name: "coredns", Message: "0 of 1 replicas ready (Deployment coredns)"}}}}
	healthy := healthAnswer{r: &machine.HealthResponse{Ok: true, Checks: []*machine.HealthCheck{etcd,
		{Name: "coredns", Ok: true, Message: "1 of 1 replicas ready"}}}}
	restarting := healthAnswer{err: status.Error(codes.Unavailable, "connection refused")}
	for _, tc := range []struct {
		name       string
		answers    []healthAnswer
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
		notStderr  []string
	}{
		{"waits, saying what it waits for", []healthAnswer{restarting, starting, healthy}, []string{"health", "--wait", "1m"}, 0,
			[]string{"coredns", "ok", "1 of 1 replicas ready"},
			[]string{"waiting: Unavailable: connection refused", "waiting: coredns (0 of 1 replicas ready (Deployment coredns))"}, nil},
		{"once, without a wait", []healthAnswer{starting, healthy}, []string{"health", "--wait", "0"}, 1,
			[]string{"coredns", "FAIL", "0 of 1 replicas ready"},
			[]string{"not healthy: coredns"}, []string{"waiting"}},
		{"no answer is the node's error", []healthAnswer{restarting}, []string{"health", "--wait", "0"}, 1, nil,
			[]string{"Unavailable: connection refused"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serveNode(t, &healthNode{answers: tc.answers})
			code, stdout, stderr := cairnctl(t, nil, addr, tc.args...)
			if code != tc.wantCode {
				t.Errorf("cairnctl %v = exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.wantCode, stdout, stderr)
			}
			checkText(t, fmt.Sprintf("cairnctl %v: stdout", tc.args), stdout, tc.wantStdout, nil)
			checkText(t, fmt.Sprintf("cairnctl %v: stderr", tc.args), stderr, tc.wantStderr, tc.notStderr)
		})
	}
}
