package server

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/machined/internal/joinsvc"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// A token advertises the port the join service really listens on, and IPv6 addresses in brackets.
func TestJoinEndpoints(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		port  int
		want  []string
	}{
		{[]string{"10.5.0.2"}, 0, []string{"10.5.0.2:50001"}},
		{[]string{"10.5.0.2", "fd00::2"}, 50101, []string{"10.5.0.2:50101", "[fd00::2]:50101"}},
		{nil, 50001, nil},
	} {
		if got := joinEndpoints(tc.addrs, tc.port); !slices.Equal(got, tc.want) {
			t.Errorf("joinEndpoints(%q, %d) = %q, want %q", tc.addrs, tc.port, got, tc.want)
		}
	}
}

// The tokens' store failing because the cluster's API is busy is Unavailable with a RetryInfo, which
// cairnctl's joins ask again after (make e2e-ha: a third control plane's join ended on one timed-out read
// of the tokens' Secret); a request refused for what it is stays refused.
func TestTokenStatus(t *testing.T) {
	busy := &joinsvc.ClusterError{Err: errors.New("read the Secret kube-system/cairn-join-tokens: net/http: timeout awaiting response headers")}
	for _, tc := range []struct {
		name  string
		err   error
		code  codes.Code
		retry bool
	}{
		{"busy API", fmt.Errorf("create a token: %w", busy), codes.Unavailable, true},
		{"bad role", mustDenied(t), codes.InvalidArgument, false},
		{"refused by the API", &kubeapi.StatusError{Code: 403, Body: "forbidden"}, codes.Internal, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := status.Convert(tokenStatus(tc.err))
			retry := slices.ContainsFunc(st.Details(), func(d any) bool { _, ok := d.(*errdetails.RetryInfo); return ok })
			if st.Code() != tc.code || retry != tc.retry {
				t.Errorf("tokenStatus(%v) = %v, RetryInfo %v; want %v, RetryInfo %v", tc.err, st.Code(), retry, tc.code, tc.retry)
			}
		})
	}
}

// mustDenied is the error Tokens.Create gives for a role it does not know.
func mustDenied(t *testing.T) error {
	_, _, err := joinsvc.NewTokens(joinsvc.FileStore(func() string { return t.TempDir() + "/tokens" }), nil).Create(t.Context(), "admin", 0, 1)
	if err == nil {
		t.Fatal("Create with role admin succeeded")
	}
	return err
}
