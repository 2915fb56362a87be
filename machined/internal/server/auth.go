package server

import (
	"context"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/cairn-os/cairn/machined/internal/events"
)

// Auth checks every call (Tap): the bootstrap token in maintenance mode, a verified client certificate and its
// role after the node lock.
type Auth struct {
	Creds *Credentials
	Token string
	Bus   *events.Bus
}

// Tap checks every call as soon as its headers arrive, before gRPC reads its request: a caller without the
// token or a certificate of the right role is refused without the node buffering what it sends (a request
// may be up to client.MaxMessageSize, so that an etcd snapshot fits in an Init). It is the only check: an
// interceptor would run only after a unary call's request had been read.
func (a *Auth) Tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	return ctx, a.authorize(ctx, info.FullMethodName)
}

func (a *Auth) authorize(ctx context.Context, method string) error {
	if public[method] {
		return nil
	}
	err := a.check(ctx, method)
	if err != nil && a.Bus != nil {
		addr := ""
		if p, ok := peer.FromContext(ctx); ok {
			addr = p.Addr.String()
		}
		a.Bus.Publish(events.Event{Kind: events.KindAuth, Outcome: events.Failed, Error: status.Convert(err).Message(), Message: method + " from " + addr})
	}
	return err
}

func (a *Auth) check(ctx context.Context, method string) error {
	if _, known := roles[method]; !known {
		return status.Errorf(codes.PermissionDenied, "%s is not allowed for anyone", method)
	}
	if !a.Creds.Decided() {
		return a.Creds.undecided()
	}
	if !a.Creds.MutualTLS() {
		token := bearer(ctx)
		switch {
		case token == "":
			return status.Error(codes.Unauthenticated, "the node is in maintenance mode: every call needs the bootstrap token (cairnctl --token, or gRPC metadata 'authorization: Bearer TOKEN')")
		case subtle.ConstantTimeCompare([]byte(token), []byte(a.Token)) != 1:
			return status.Error(codes.Unauthenticated, "wrong bootstrap token")
		}
		return nil
	}
	role, err := roleOf(ctx)
	if err != nil {
		return err
	}
	if !Allowed(role, method) {
		return status.Errorf(codes.PermissionDenied, "role %s may not call %s", role, method[strings.LastIndex(method, "/")+1:])
	}
	return nil
}

// roleOf reads the role from the verified client certificate's Organization.
func roleOf(ctx context.Context) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no peer information")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", status.Error(codes.Unauthenticated, "this node is configured: calls need a client certificate from the cluster's machine CA (cairnctl --cairnconfig); the bootstrap token no longer works")
	}
	for _, org := range info.State.VerifiedChains[0][0].Subject.Organization {
		for _, r := range all {
			if org == r {
				return r, nil
			}
		}
	}
	return "", status.Errorf(codes.PermissionDenied, "the client certificate names no Cairn role (want Organization %s, %s or %s)", admin, operator, reader)
}

// clientName is the verified client certificate's common name, for records of who did what ("" without
// one).
func clientName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return ""
	}
	return info.State.VerifiedChains[0][0].Subject.CommonName
}

func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}
