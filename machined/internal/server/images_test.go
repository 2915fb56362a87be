package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/images"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

// fakeImages reads the whole upload, then answers with err or the one image it "imported".
type fakeImages struct {
	err error

	mu       sync.Mutex
	header   images.Header
	received []byte
	readErr  error // what ended the upload
	removed  []string
	force    bool
}

func (f *fakeImages) Import(ctx context.Context, h images.Header, data io.Reader, progress func(images.Progress)) ([]images.Image, error) {
	b, err := io.ReadAll(data)
	f.mu.Lock()
	f.header, f.received, f.readErr = h, b, err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	progress(images.Progress{Phase: images.PhaseReceiving, Received: uint64(len(b)), Size: h.Size})
	progress(images.Progress{Phase: images.PhaseVerifying})
	progress(images.Progress{Phase: images.PhaseUnpacking, Image: "example.com/app:1.0"})
	if f.err != nil {
		return nil, f.err
	}
	return []images.Image{{Name: "example.com/app:1.0", Digest: "sha256:abc", Size: 1234, Unpacked: true}}, nil
}

func (f *fakeImages) List(context.Context) ([]images.Image, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []images.Image{{Name: "registry.k8s.io/pause:3.10", Digest: "sha256:def", Size: 300000, Bundled: true, Unpacked: true}}, nil
}

func (f *fakeImages) Remove(_ context.Context, names []string, force bool) ([]string, error) {
	f.mu.Lock()
	f.removed, f.force = names, force
	f.mu.Unlock()
	return names, f.err
}

func (f *fakeImages) upload() (images.Header, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.header, f.received, f.readErr
}

// serveImages starts a maintenance-mode server whose image operations are fake.
func serveImages(t *testing.T, f Images) machine.MachineClient {
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
	g := New(&Server{Node: n, Bus: bus, Supervise: supervisor.New(bus, nil), Images: f}, &Auth{Creds: creds, Token: token, Bus: bus})
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
	return dial(t, client.Options{Endpoint: l.Addr().String(), Token: token, Fingerprint: creds.Fingerprint()})
}

// importAll sends the messages and collects the answers until the stream ends.
func importAll(t *testing.T, mc machine.MachineClient, msgs ...*machine.ImageImportRequest) ([]*machine.ImageImportResponse, error) {
	t.Helper()
	s, err := mc.ImageImport(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			break // the server ended the call; Recv tells why
		}
	}
	s.CloseSend()
	var out []*machine.ImageImportResponse
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func header(size uint64, sha string) *machine.ImageImportRequest {
	return &machine.ImageImportRequest{Msg: &machine.ImageImportRequest_Header{Header: &machine.ImageImportHeader{FileName: "app.tar", Size: size, Sha256: sha}}}
}

func data(b []byte) *machine.ImageImportRequest {
	return &machine.ImageImportRequest{Msg: &machine.ImageImportRequest_Data{Data: b}}
}

func TestImageImport(t *testing.T) {
	f := &fakeImages{}
	mc := serveImages(t, f)
	archive := bytes.Repeat([]byte("layer"), 100000)
	sha := strings.Repeat("AB", 32)
	msgs := []*machine.ImageImportRequest{header(uint64(len(archive)), sha)}
	for b := archive; len(b) > 0; {
		n := min(len(b), 64<<10)
		msgs = append(msgs, data(b[:n]))
		b = b[n:]
	}
	out, err := importAll(t, mc, msgs...)
	if err != nil {
		t.Fatalf("ImageImport() = %v", err)
	}
	h, got, _ := f.upload()
	if !bytes.Equal(got, archive) || h.Size != uint64(len(archive)) || h.FileName != "app.tar" || h.SHA256 != strings.ToLower(sha) {
		t.Errorf("the importer got %d bytes and header %+v, want the %d sent with the lower-case checksum", len(got), h, len(archive))
	}
	var phases []string
	for _, r := range out[:len(out)-1] {
		phases = append(phases, r.GetProgress().GetPhase())
	}
	if strings.Join(phases, ",") != "receiving,verifying,unpacking" || out[2].GetProgress().GetImage() != "example.com/app:1.0" {
		t.Errorf("progress = %v, want receiving, verifying, unpacking example.com/app:1.0", out)
	}
	res := out[len(out)-1].GetResult()
	if len(res.GetImages()) != 1 || res.Images[0].Name != "example.com/app:1.0" || res.Images[0].Digest != "sha256:abc" || res.Images[0].Size != 1234 {
		t.Errorf("result = %v, want the imported image", res)
	}
}

func TestImageImportErrors(t *testing.T) {
	tests := []struct {
		name     string
		importer error
		msgs     []*machine.ImageImportRequest
		code     codes.Code
		msg      string
	}{
		{"no header", nil, nil, codes.InvalidArgument, "ended before its header"},
		{"data first", nil, []*machine.ImageImportRequest{data([]byte("x"))}, codes.InvalidArgument, "the first message must be the header"},
		{"bad checksum", nil, []*machine.ImageImportRequest{header(1, "xyz")}, codes.InvalidArgument, `header.sha256: "xyz" is not a SHA-256`},
		{"second header", nil, []*machine.ImageImportRequest{header(1, ""), data([]byte("x")), header(1, "")}, codes.InvalidArgument, "a second header"},
		{"bad archive", &images.ArchiveError{Msg: "archive truncated at byte 700: index.json ends early"}, []*machine.ImageImportRequest{header(1, ""), data([]byte("x"))},
			codes.InvalidArgument, "archive truncated at byte 700"},
		{"no containerd", &images.NotRunningError{}, []*machine.ImageImportRequest{header(1, ""), data([]byte("x"))},
			codes.FailedPrecondition, "containerd is not running on this node yet (state Boot): Init or Join it first"},
		{"busy", &images.BusyError{File: "other.tar", Since: time.Now()}, []*machine.ImageImportRequest{header(1, ""), data([]byte("x"))}, codes.Aborted, "other.tar"},
		{"disk full", &images.NoSpaceError{Msg: "no room"}, []*machine.ImageImportRequest{header(1, ""), data([]byte("x"))}, codes.ResourceExhausted, "no room"},
		{"containerd failed", errors.New("unpack example.com/app:1.0: boom"), []*machine.ImageImportRequest{header(1, ""), data([]byte("x"))}, codes.Internal, "boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mc := serveImages(t, &fakeImages{err: tc.importer})
			_, err := importAll(t, mc, tc.msgs...)
			if code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("ImageImport() = %v, want %v with %q", err, tc.code, tc.msg)
			}
		})
	}
}

// A client that goes away mid-upload ends the import: the importer's read fails.
func TestImageImportCancelled(t *testing.T) {
	f := &fakeImages{}
	mc := serveImages(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := mc.ImageImport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(header(1<<20, "")); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(data([]byte("part"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, err := f.upload(); err != nil {
			if code(err) != codes.Canceled {
				t.Errorf("the importer's read ended with %v, want Canceled", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the importer still reads 5s after the client went away")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestImageListAndRemove(t *testing.T) {
	f := &fakeImages{}
	mc := serveImages(t, f)
	l, err := mc.ImageList(context.Background(), &machine.ImageListRequest{})
	if err != nil || len(l.Images) != 1 || !l.Images[0].Bundled || l.Images[0].Name != "registry.k8s.io/pause:3.10" || !l.Images[0].Unpacked {
		t.Fatalf("ImageList() = %v, %v; want the bundled pause image", l, err)
	}
	r, err := mc.ImageRemove(context.Background(), &machine.ImageRemoveRequest{Names: []string{"app:1.0"}, Force: true})
	if err != nil || len(r.Removed) != 1 || !f.force {
		t.Fatalf("ImageRemove() = %v, %v (force passed: %t)", r, err, f.force)
	}
	if _, err := mc.ImageRemove(context.Background(), &machine.ImageRemoveRequest{}); code(err) != codes.InvalidArgument {
		t.Errorf("ImageRemove(no names) = %v, want InvalidArgument", err)
	}
	if _, err := mc.ImageRemove(context.Background(), &machine.ImageRemoveRequest{Names: []string{"a", " "}}); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "names[1]") {
		t.Errorf("ImageRemove(an empty name) = %v, want InvalidArgument naming names[1]", err)
	}
	for _, tc := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{&images.NotFoundError{Names: []string{"nope:1"}}, codes.NotFound, "no image named nope:1"},
		{&images.ProtectedError{Names: []string{"registry.k8s.io/pause:3.10"}}, codes.FailedPrecondition, "registry.k8s.io/pause:3.10: carried by the node's image bundle"},
	} {
		f.err = tc.err
		_, err := mc.ImageRemove(context.Background(), &machine.ImageRemoveRequest{Names: []string{"x"}})
		if code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ImageRemove() with %T = %v, want %v with %q", tc.err, err, tc.code, tc.msg)
		}
	}
}

func TestImageRoles(t *testing.T) {
	for _, tc := range []struct {
		method string
		role   string
		want   bool
	}{
		{machine.Machine_ImageList_FullMethodName, reader, true},
		{machine.Machine_ImageList_FullMethodName, operator, true},
		{machine.Machine_ImageImport_FullMethodName, reader, false},
		{machine.Machine_ImageImport_FullMethodName, operator, true},
		{machine.Machine_ImageImport_FullMethodName, admin, true},
		{machine.Machine_ImageRemove_FullMethodName, reader, false},
		{machine.Machine_ImageRemove_FullMethodName, operator, true},
	} {
		if got := Allowed(tc.role, tc.method); got != tc.want {
			t.Errorf("Allowed(%s, %s) = %t, want %t", tc.role, tc.method, got, tc.want)
		}
	}
}

func TestImagesUnimplementedWithoutService(t *testing.T) {
	mc := serveImages(t, nil)
	if _, err := mc.ImageList(context.Background(), &machine.ImageListRequest{}); code(err) != codes.Unimplemented {
		t.Errorf("ImageList() without images = %v, want Unimplemented", err)
	}
}
