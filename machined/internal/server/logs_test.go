package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/logring"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

// serveDay2 starts a test server with the day-2 sources given (nil ones stay nil).
func serveDay2(t *testing.T, logs LogSource, kernel KernelLog, etcd EtcdOps, extra ...grpc.ServerOption) *testServer {
	t.Helper()
	bus := events.NewBus(nil, nil)
	creds, err := NewCredentials("n1", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n := node.New(node.Options{Paths: paths.Paths{Root: t.TempDir()}, Bus: bus, Sys: noSys{}, API: creds, Sandbox: true,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g := New(&Server{Node: n, Bus: bus, Supervise: supervisor.New(bus, nil), LogSource: logs, KernelLog: kernel, EtcdOps: etcd},
		&Auth{Creds: creds, Token: token, Bus: bus}, extra...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(l)
	t.Cleanup(func() {
		g.Stop()
		cancel()
		for i := 0; i < 200 && n.Status().Sequence != ""; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	})
	return &testServer{addr: l.Addr().String(), creds: creds, node: n, bus: bus}
}

func maintenanceClient(t *testing.T, s *testServer) machine.MachineClient {
	t.Helper()
	return dial(t, client.Options{Endpoint: s.addr, Token: token, Fingerprint: s.creds.Fingerprint()})
}

type notFound struct{ msg string }

func (e notFound) Error() string { return e.msg }
func (notFound) NotFound()       {}

type precondition struct{ msg string }

func (e precondition) Error() string { return e.msg }
func (precondition) Precondition()   {}

// fakeLogs serves fixed lines per service; a follower then gets what is pushed until it leaves.
type fakeLogs struct {
	lines  map[string][]string
	more   chan string
	called chan struct{}
	left   chan struct{} // closed when a follower's context ended
}

func (f *fakeLogs) Logs(ctx context.Context, service string, tail int, follow bool, send func(logring.Record) error) error {
	lines, ok := f.lines[service]
	if !ok {
		return notFound{"no log named " + service + "; known: machined"}
	}
	if tail > 0 && len(lines) > tail {
		lines = lines[len(lines)-tail:]
	}
	for _, l := range lines {
		if err := send(logring.Record{Time: time.Unix(1700000000, 0), Service: service, Line: l}); err != nil {
			return err
		}
	}
	if !follow {
		return nil
	}
	close(f.called)
	for {
		select {
		case <-ctx.Done():
			close(f.left)
			return ctx.Err()
		case l := <-f.more:
			if err := send(logring.Record{Time: time.Now(), Service: service, Line: l}); err != nil {
				return err
			}
		}
	}
}

func recvLines(t *testing.T, s interface {
	Recv() (*machine.LogLine, error)
}) ([]string, error) {
	t.Helper()
	var out []string
	for {
		l, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, l.Line)
	}
}

func TestLogs(t *testing.T) {
	src := &fakeLogs{lines: map[string][]string{"machined": {"one", "two", "bad \xff byte"}}}
	mc := maintenanceClient(t, serveDay2(t, src, nil, nil))
	ctx := context.Background()
	tests := []struct {
		name string
		req  *machine.LogsRequest
		want []string
		code codes.Code
		msg  string
	}{
		{name: "all", req: &machine.LogsRequest{Service: "machined"}, want: []string{"one", "two", "bad \uFFFD byte"}},
		{name: "tail", req: &machine.LogsRequest{Service: "machined", Tail: 1}, want: []string{"bad \uFFFD byte"}},
		{name: "unknown", req: &machine.LogsRequest{Service: "kubelt"}, code: codes.NotFound, msg: "known: machined"},
		{name: "no service", req: &machine.LogsRequest{}, code: codes.InvalidArgument, msg: "service"},
		{name: "previous and follow", req: &machine.LogsRequest{Service: "machined", Previous: true, Follow: true},
			code: codes.InvalidArgument, msg: "do not go together"},
		// fakeLogs keeps no previous runs.
		{name: "previous unsupported", req: &machine.LogsRequest{Service: "machined", Previous: true},
			code: codes.Unimplemented, msg: "previous runs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := mc.Logs(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := recvLines(t, s)
			if code(err) != tc.code || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("Logs(%v) = %v, want code %v with %q", tc.req, err, tc.code, tc.msg)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Logs(%v) lines mismatch (-want +got):\n%s", tc.req, diff)
			}
		})
	}
}

func TestLogsFollowEndsWhenTheClientLeaves(t *testing.T) {
	src := &fakeLogs{lines: map[string][]string{"kubelet": {"kept"}}, more: make(chan string), called: make(chan struct{}),
		left: make(chan struct{})}
	mc := maintenanceClient(t, serveDay2(t, src, nil, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := mc.Logs(ctx, &machine.LogsRequest{Service: "kubelet", Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := s.Recv(); err != nil || l.Line != "kept" || l.Service != "kubelet" || l.Time.AsTime().Unix() != 1700000000 {
		t.Fatalf("first line = %v, %v, want kubelet's kept line with its time", l, err)
	}
	<-src.called
	src.more <- "later"
	if l, err := s.Recv(); err != nil || l.Line != "later" {
		t.Fatalf("followed line = %v, %v, want later", l, err)
	}
	cancel()
	select {
	case <-src.left:
	case <-time.After(5 * time.Second):
		t.Fatal("the log source kept following after the client left")
	}
}

type fakeKernel struct {
	lines []string
	err   error
}

func (f fakeKernel) Dmesg(_ context.Context, tail int, _ bool, send func(logring.Record) error) error {
	if f.err != nil {
		return f.err
	}
	for _, l := range f.lines {
		if err := send(logring.Record{Time: time.Now(), Service: "kernel", Line: l}); err != nil {
			return err
		}
	}
	return nil
}

func TestDmesg(t *testing.T) {
	ctx := context.Background()
	t.Run("lines", func(t *testing.T) {
		mc := maintenanceClient(t, serveDay2(t, nil, fakeKernel{lines: []string{"kern.info: Linux version"}}, nil))
		s, err := mc.Dmesg(ctx, &machine.DmesgRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := recvLines(t, s)
		if err != nil || len(got) != 1 || got[0] != "kern.info: Linux version" {
			t.Fatalf("Dmesg() = %q, %v", got, err)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		mc := maintenanceClient(t, serveDay2(t, nil, fakeKernel{err: precondition{"the kernel log /dev/kmsg cannot be read"}}, nil))
		s, err := mc.Dmesg(ctx, &machine.DmesgRequest{})
		if err == nil {
			_, err = recvLines(t, s)
		}
		if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "/dev/kmsg") {
			t.Fatalf("Dmesg() = %v, want FailedPrecondition naming /dev/kmsg", err)
		}
	})
}

func TestDay2WithoutSourcesIsUnimplemented(t *testing.T) {
	mc := maintenanceClient(t, serveDay2(t, nil, nil, nil))
	ctx := context.Background()
	calls := map[string]func() error{
		"Logs": func() error {
			s, err := mc.Logs(ctx, &machine.LogsRequest{Service: "machined"})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		},
		"Dmesg": func() error {
			s, err := mc.Dmesg(ctx, &machine.DmesgRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		},
		"EtcdMembers": func() error { _, err := mc.EtcdMembers(ctx, &machine.EtcdMembersRequest{}); return err },
		"EtcdSnapshot": func() error {
			s, err := mc.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		},
	}
	for name, call := range calls {
		if err := call(); code(err) != codes.Unimplemented {
			t.Errorf("%s() without a source = %v, want Unimplemented", name, err)
		}
	}
}
