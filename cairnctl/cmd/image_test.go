package cmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
)

// imageNode is a fake node: it takes an upload whole and answers with progress and one image, or fails
// with err; it lists one bundled image and removes what it is asked to.
type imageNode struct {
	machine.UnimplementedMachineServer
	err error

	mu      sync.Mutex
	header  *machine.ImageImportHeader
	data    []byte
	removed *machine.ImageRemoveRequest
}

func (n *imageNode) ImageImport(s grpc.BidiStreamingServer[machine.ImageImportRequest, machine.ImageImportResponse]) error {
	first, err := s.Recv()
	if err != nil {
		return err
	}
	var data []byte
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		data = append(data, m.GetData()...)
	}
	n.mu.Lock()
	n.header, n.data = first.GetHeader(), data
	n.mu.Unlock()
	if n.err != nil {
		return n.err
	}
	for _, p := range []*machine.ImageImportProgress{{Phase: "receiving", Received: uint64(len(data)), Size: first.GetHeader().GetSize()}, {Phase: "verifying"}, {Phase: "unpacking", Image: "example.com/app:1.0"}} {
		if err := s.Send(&machine.ImageImportResponse{Msg: &machine.ImageImportResponse_Progress{Progress: p}}); err != nil {
			return err
		}
	}
	return s.Send(&machine.ImageImportResponse{Msg: &machine.ImageImportResponse_Result{Result: &machine.ImageImportResult{
		Images: []*machine.Image{{Name: "example.com/app:1.0", Digest: "sha256:0123456789abcdef0123", Size: 3 << 20, Unpacked: true}}}}})
}

func (n *imageNode) ImageList(context.Context, *machine.ImageListRequest) (*machine.ImageListResponse, error) {
	return &machine.ImageListResponse{Images: []*machine.Image{
		{Name: "registry.k8s.io/pause:3.10", Digest: "sha256:fedcba9876543210fedc", Size: 700 << 10, Bundled: true, Unpacked: true}}}, nil
}

func (n *imageNode) ImageRemove(_ context.Context, r *machine.ImageRemoveRequest) (*machine.ImageRemoveResponse, error) {
	n.mu.Lock()
	n.removed = r
	n.mu.Unlock()
	if n.err != nil {
		return nil, n.err
	}
	return &machine.ImageRemoveResponse{Removed: r.Names}, nil
}

// serveNode starts the fake node over TLS with a throwaway certificate (the client skips verifying it).
func serveNode(t *testing.T, n machine.MachineServer) string {
	t.Helper()
	ca, err := pki.NewCA("test node", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	machine.RegisterMachineServer(g, n)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return l.Addr().String()
}

// cairnctl runs the command line against nodes with stdin, returning the exit code and both outputs.
func cairnctl(t *testing.T, stdin io.Reader, nodes string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	g := &globals{stdout: &stdout, stderr: &stderr}
	root := newRoot(g)
	root.SetArgs(append([]string{"--nodes", nodes, "--token", "t0k", "--insecure-skip-verify"}, args...))
	root.SetIn(stdin)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	if err := root.ExecuteContext(context.Background()); err != nil {
		stderr.WriteString("cairnctl: " + describe(err) + "\n")
		return 1, stdout.String(), stderr.String()
	}
	return 0, stdout.String(), stderr.String()
}

func TestImageImport(t *testing.T) {
	archive := bytes.Repeat([]byte("0123456789"), 250000) // 2.5 MB: three data messages
	file := filepath.Join(t.TempDir(), "app.tar")
	if err := os.WriteFile(file, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	n1, n2 := &imageNode{}, &imageNode{}
	a1, a2 := serveNode(t, n1), serveNode(t, n2)

	code, out, errOut := cairnctl(t, nil, a1+","+a2, "image", "import", file)
	if code != 0 {
		t.Fatalf("image import = %d, %s", code, errOut)
	}
	for _, n := range []*imageNode{n1, n2} {
		if !bytes.Equal(n.data, archive) || n.header.GetFileName() != "app.tar" || n.header.GetSize() != uint64(len(archive)) ||
			n.header.GetSha256() != sha(string(archive)) {
			t.Errorf("a node got %d bytes with header %v, want the %d of app.tar with its size and sha256", len(n.data), n.header, len(archive))
		}
	}
	for _, a := range []string{a1, a2} {
		if want := a + ": imported example.com/app:1.0 (sha256:0123456789ab, 3.0MiB)\n"; !strings.Contains(out, want) {
			t.Errorf("stdout = %q, want %q", out, want)
		}
	}
	if errOut != "" {
		t.Errorf("stderr = %q, want nothing for an import that took no time", errOut)
	}

	// From standard input, as JSON.
	code, out, errOut = cairnctl(t, bytes.NewReader(archive), a1, "-o", "json", "image", "import", "-")
	if code != 0 || !strings.Contains(out, `"name":"example.com/app:1.0"`) || n1.header.GetFileName() != "stdin" || !bytes.Equal(n1.data, archive) {
		t.Errorf("image import - = %d, %q, %q (header %v)", code, out, errOut, n1.header)
	}
}

func TestImageImportRefused(t *testing.T) {
	n := &imageNode{err: status.Error(codes.InvalidArgument, "archive truncated at byte 1500000: blobs/sha256/3cd9 ends early (it should be 2500000 bytes)")}
	addr := serveNode(t, n)
	file := filepath.Join(t.TempDir(), "app.tar")
	os.WriteFile(file, []byte("partial"), 0o644)
	code, out, errOut := cairnctl(t, nil, addr, "image", "import", file)
	want := "cairnctl: node " + addr + ": InvalidArgument: archive truncated at byte 1500000: blobs/sha256/3cd9 ends early (it should be 2500000 bytes)\n"
	if code != 1 || out != "" || !strings.HasSuffix(errOut, want) {
		t.Errorf("image import (refused) = %d, %q, %q; want exit 1 and %q", code, out, errOut, want)
	}
	if code, _, errOut := cairnctl(t, nil, addr, "image", "import", filepath.Join(t.TempDir(), "missing.tar")); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("image import (no file) = %d, %q", code, errOut)
	}
}

func TestImageListAndRemove(t *testing.T) {
	n := &imageNode{}
	addr := serveNode(t, n)
	code, out, _ := cairnctl(t, nil, addr, "image", "list")
	if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "registry.k8s.io/pause:3.10  sha256:fedcba987654  700.0KiB  yes      yes") {
		t.Errorf("image list = %d:\n%s", code, out)
	}
	code, out, _ = cairnctl(t, nil, addr, "-o", "json", "image", "list")
	if code != 0 || !strings.Contains(out, `"bundled":true`) {
		t.Errorf("image list -o json = %d, %s", code, out)
	}
	code, out, _ = cairnctl(t, nil, addr, "image", "remove", "app:1.0", "other:2", "--force")
	if code != 0 || out != "removed app:1.0\nremoved other:2\n" || !n.removed.Force || len(n.removed.Names) != 2 {
		t.Errorf("image remove = %d, %q (request %v)", code, out, n.removed)
	}
	n.err = status.Error(codes.FailedPrecondition, "registry.k8s.io/pause:3.10: carried by the node's image bundle")
	if code, _, errOut := cairnctl(t, nil, addr, "image", "remove", "registry.k8s.io/pause:3.10"); code != 1 || !strings.Contains(errOut, "FailedPrecondition: registry.k8s.io/pause:3.10") {
		t.Errorf("image remove (bundled) = %d, %q", code, errOut)
	}
	if code, _, _ := cairnctl(t, nil, addr, "image", "remove"); code != 1 {
		t.Errorf("image remove without names = %d, want 1", code)
	}
}

func TestImageImportHelp(t *testing.T) {
	_, out, _ := cairnctl(t, nil, "x", "image", "import", "--help")
	for _, want := range []string{"OCI image layout", "docker save", "gzip-compressed", "k8s.io", "kubelet", "twice the\narchive's size", "linux/amd64", "'-'"} {
		if !strings.Contains(out, want) {
			t.Errorf("image import --help lacks %q:\n%s", want, out)
		}
	}
}

func TestImportProgress(t *testing.T) {
	var b strings.Builder
	clock := time.Unix(0, 0)
	p := newImportProgress(&b, "n1: ", "app.tar", func() time.Time { return clock })
	step := func(d time.Duration, m *machine.ImageImportProgress) {
		clock = clock.Add(d)
		p.show(m)
	}
	step(500*time.Millisecond, &machine.ImageImportProgress{Phase: "receiving", Received: 10 << 20, Size: 100 << 20}) // a moment: quiet
	step(time.Second, &machine.ImageImportProgress{Phase: "receiving", Received: 30 << 20, Size: 100 << 20})
	step(time.Second, &machine.ImageImportProgress{Phase: "receiving", Received: 50 << 20, Size: 100 << 20}) // too soon again
	step(3*time.Second, &machine.ImageImportProgress{Phase: "receiving", Received: 90 << 20, Size: 100 << 20})
	step(time.Second, &machine.ImageImportProgress{Phase: "receiving", Received: 100 << 20, Size: 100 << 20}) // complete: always
	step(0, &machine.ImageImportProgress{Phase: "verifying"})
	step(0, &machine.ImageImportProgress{Phase: "importing"})
	step(2*time.Second, &machine.ImageImportProgress{Phase: "unpacking", Image: "example.com/app:1.0"})
	p.done()
	want := `n1: uploading app.tar: 30% (30.0MiB of 100.0MiB)
n1: uploading app.tar: 90% (90.0MiB of 100.0MiB)
n1: uploading app.tar: 100% (100.0MiB of 100.0MiB)
n1: verifying app.tar
n1: importing app.tar
n1: unpacking example.com/app:1.0
n1: done in 8.5s
`
	if b.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", b.String(), want)
	}
}
