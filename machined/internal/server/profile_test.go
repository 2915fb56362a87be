package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/profile"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

func serveProfiles(t *testing.T) *testServer {
	t.Helper()
	return serveWith(t, func(s *Server) { s.Profiles = profile.Runtime{} })
}

// serveWith serves a maintenance-mode sandbox node whose Server set fills in.
func serveWith(t *testing.T, set func(*Server)) *testServer {
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
	srv := &Server{Node: n, Bus: bus, Supervise: supervisor.New(bus, nil)}
	set(srv)
	g := New(srv, &Auth{Creds: creds, Token: token, Bus: bus})
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

func TestProfile(t *testing.T) {
	mc := maintenanceClient(t, serveProfiles(t))
	s, err := mc.Profile(context.Background(), &machine.ProfileRequest{Name: "heap", Gc: true})
	if err != nil {
		t.Fatal(err)
	}
	var data bytes.Buffer
	sum := ""
	for {
		c, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data.Write(c.Data)
		sum = c.Sha256
	}
	h := sha256.Sum256(data.Bytes())
	if got := hex.EncodeToString(h[:]); sum != got {
		t.Errorf("last chunk's checksum %q, want %q", sum, got)
	}
	if b := data.Bytes(); len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile of %d bytes is not pprof's gzipped protobuf", len(b))
	}

	s, err = mc.Profile(context.Background(), &machine.ProfileRequest{Name: "nope"})
	if err == nil {
		_, err = s.Recv()
	}
	if code(err) != codes.InvalidArgument {
		t.Errorf("unknown profile: %v, want InvalidArgument", err)
	}
}
