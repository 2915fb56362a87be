package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cairn-os/cairn/api/machine"
)

// retryNode is a joining node without a TPM.
type retryNode struct{ machine.MachineClient }

func (retryNode) TPMAttest(context.Context, *machine.TPMAttestRequest, ...grpc.CallOption) (*machine.TPMAttestResponse, error) {
	return nil, status.Error(codes.FailedPrecondition, "no TPM")
}

// retryControlPlane issues numbered tokens and answers ticket requests with errs, in turn, then a ticket.
type retryControlPlane struct {
	machine.MachineClient
	machine.JoinServiceClient
	issued, asked []string
	errs          []error
	// tokenErrs answer CreateJoinToken, in turn, before it issues tokens.
	tokenErrs []error
}

func (c *retryControlPlane) CreateJoinToken(context.Context, *machine.CreateJoinTokenRequest, ...grpc.CallOption) (*machine.CreateJoinTokenResponse, error) {
	if len(c.tokenErrs) > 0 {
		err := c.tokenErrs[0]
		c.tokenErrs = c.tokenErrs[1:]
		return nil, err
	}
	c.issued = append(c.issued, fmt.Sprintf("token%d", len(c.issued)+1))
	return &machine.CreateJoinTokenResponse{Token: c.issued[len(c.issued)-1]}, nil
}

func (c *retryControlPlane) RequestTicket(_ context.Context, r *machine.TicketRequest, _ ...grpc.CallOption) (*machine.JoinTicket, error) {
	c.asked = append(c.asked, r.Token)
	if i := len(c.asked) - 1; i < len(c.errs) {
		return nil, c.errs[i]
	}
	return &machine.JoinTicket{Role: "worker"}, nil
}

// busyErr is the join service's answer when the cluster's API did not answer: Unavailable with a RetryInfo.
func busyErr(t *testing.T, reason string) error {
	st, err := status.New(codes.Unavailable, reason).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// A control plane too busy to issue a ticket is asked again, with a new token each time (make e2e-ha: a
// third control plane's join ended on one timed-out API call of the first); a refusal is not retried,
// and the retries end with the last refusal.
func TestTicketRetries(t *testing.T) {
	busy := busyErr(t, "clear the left mark of Node cp3: timeout awaiting response headers")
	denied := status.Error(codes.PermissionDenied, "token used up")
	// What a client's transport says for a server it cannot reach or does not trust: no retry mends it.
	unreachable := status.Error(codes.Unavailable, "connection error: desc = \"transport: authentication handshake failed\"")
	for _, tc := range []struct {
		name     string
		errs     []error
		retryFor time.Duration
		wantCode codes.Code
		wantAsks int
	}{
		{"busy twice, then a ticket", []error{busy, busy}, time.Minute, codes.OK, 3},
		{"refused: not asked again", []error{denied, busy}, time.Minute, codes.PermissionDenied, 1},
		{"unreachable: not asked again", []error{unreachable, busy}, time.Minute, codes.Unavailable, 1},
		{"busy past the retries", []error{busy, busy, busy, busy, busy, busy}, time.Nanosecond, codes.Unavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := &retryControlPlane{errs: tc.errs}
			var told []string
			j := Joiner{Node: retryNode{}, ControlPlane: cp, JoinService: cp, JoinServiceName: "cp1:50001",
				RetryFor: tc.retryFor, Retrying: func(notice string) { told = append(told, notice) }}
			ticket, err := j.ticket(t.Context(), "worker", "w1", []string{"10.5.0.5"}, []byte("key"))
			if status.Code(err) != tc.wantCode || (err == nil) != (ticket != nil) {
				t.Fatalf("ticket() = %v, %v; want code %v", ticket, err, tc.wantCode)
			}
			if len(cp.asked) != tc.wantAsks || len(told) != tc.wantAsks-1 {
				t.Errorf("asked %d times (%q), told of %d retries; want %d asks", len(cp.asked), cp.asked, len(told), tc.wantAsks)
			}
			for _, n := range told {
				if want := "the control plane is too busy to issue a ticket (clear the left mark of Node cp3: timeout awaiting response headers); asking again in 1ms"; n != want {
					t.Errorf("retry notice %q, want %q", n, want)
				}
			}
			if strings.Join(cp.asked, " ") != strings.Join(cp.issued, " ") {
				t.Errorf("tokens asked with %q, issued %q: want a new token for each ask", cp.asked, cp.issued)
			}
			if err != nil && !strings.Contains(err.Error(), "request a ticket for w1") {
				t.Errorf("error %q does not say what failed", err)
			}
		})
	}
}

// A control plane whose API server did not answer when it was to make the join token is asked again too
// (make e2e-ha: a third control plane's join ended on one timed-out read of the tokens' Secret), and a
// token it refuses to make is not.
func TestTokenRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		errs     []error
		wantCode codes.Code
		wantTold int
	}{
		{"busy, then a token", []error{busyErr(t, "read the Secret kube-system/cairn-join-tokens: timeout awaiting response headers")}, codes.OK, 1},
		{"refused", []error{status.Error(codes.FailedPrecondition, "join tokens are managed on a configured control-plane node")}, codes.FailedPrecondition, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := &retryControlPlane{tokenErrs: tc.errs}
			var told []string
			j := Joiner{Node: retryNode{}, ControlPlane: cp, JoinService: cp, ControlPlaneName: "cp1", RetryFor: time.Minute,
				Retrying: func(notice string) { told = append(told, notice) }}
			_, err := j.ticket(t.Context(), "controlplane", "cp3", []string{"10.5.0.4"}, []byte("key"))
			if status.Code(err) != tc.wantCode || len(told) != tc.wantTold {
				t.Fatalf("ticket() = %v after %d retry notices (%q); want code %v after %d", err, len(told), told, tc.wantCode, tc.wantTold)
			}
			if err != nil && !strings.Contains(err.Error(), "control plane cp1: create a controlplane join token") {
				t.Errorf("error %q does not say what failed", err)
			}
		})
	}
}
