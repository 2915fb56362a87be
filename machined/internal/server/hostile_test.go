package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/events"
)

// payloadCounter is a gRPC stats handler that counts the request bytes the server read, per method.
type payloadCounter struct {
	mu    sync.Mutex
	bytes map[string]int
}

type methodKey struct{}

func (c *payloadCounter) TagRPC(ctx context.Context, i *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, i.FullMethodName)
}

func (c *payloadCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok {
		c.mu.Lock()
		c.bytes[ctx.Value(methodKey{}).(string)] += in.WireLength
		c.mu.Unlock()
	}
}

func (c *payloadCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (c *payloadCounter) HandleConn(context.Context, stats.ConnStats) {}

func (c *payloadCounter) read(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes[method]
}

// A caller without the token is refused when its call's headers arrive: machined, PID 1, never buffers
// the request it sends (up to client.MaxMessageSize, 512 MiB, for anyone who can reach the port), and the
// refusal is an event. gRPC reads a unary call's request before any interceptor runs, so the check must
// come first (a streaming call's handler reads it, after the interceptor). The request here is Status with
// 8 MiB of a field Status does not have, which protobuf keeps as unknown; with the token it is read and
// answered, which shows the counter counts.
func TestUnauthenticatedRequestIsNotRead(t *testing.T) {
	counter := &payloadCounter{bytes: map[string]int{}}
	s := serveDay2(t, nil, nil, nil, grpc.StatsHandler(counter))
	_, evs, cancel := s.bus.Subscribe(0)
	defer cancel()
	big := &machine.InitRequest{Config: []byte(strings.Repeat("x", 8<<20))}
	method := machine.Machine_Status_FullMethodName

	tests := []struct {
		name     string
		o        client.Options
		want     codes.Code
		wantRead bool
	}{
		{"wrong token", client.Options{Token: "nope", InsecureSkipVerify: true}, codes.Unauthenticated, false},
		{"no token", client.Options{Token: " ", InsecureSkipVerify: true}, codes.Unauthenticated, false},
		{"the token", client.Options{Token: token, Fingerprint: s.creds.Fingerprint()}, codes.OK, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Endpoint = s.addr
			conn, err := client.Dial(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			before := counter.read(method)
			err = conn.Invoke(context.Background(), method, big, &machine.StatusResponse{})
			if code(err) != tc.want {
				t.Fatalf("Status(8 MiB) = %v, want code %v", err, tc.want)
			}
			read := counter.read(method) - before
			if gotRead := read >= len(big.Config); gotRead != tc.wantRead {
				t.Errorf("the server read %d bytes of the 8 MiB request; want it read: %v", read, tc.wantRead)
			}
		})
	}
	refused := 0
	timeout := time.After(5 * time.Second)
	for refused < 2 {
		select {
		case e := <-evs:
			if e.Kind == events.KindAuth && e.Outcome == events.Failed && strings.HasPrefix(e.Message, method) {
				refused++
			}
		case <-timeout:
			t.Fatalf("%d refusal events for Status, want 2 (the wrong token and the missing one)", refused)
		}
	}
}
