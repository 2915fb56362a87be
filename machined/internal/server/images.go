package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/images"
)

// Images imports, lists and removes the container images of containerd's k8s.io namespace
// (images.Service).
type Images interface {
	// Import reads the archive the header announces from data, telling progress each step, and returns
	// the images imported.
	Import(ctx context.Context, h images.Header, data io.Reader, progress func(images.Progress)) ([]images.Image, error)
	List(ctx context.Context) ([]images.Image, error)
	// Remove removes every named image or none, returning the full names removed.
	Remove(ctx context.Context, names []string, force bool) ([]string, error)
}

var errNoImages = status.Error(codes.Unimplemented, "this node serves no image operations (machined runs without them)")

// ImageImport receives an image archive (a header, then the data) and imports it, streaming progress and
// finally the images imported.
func (s *Server) ImageImport(stream grpc.BidiStreamingServer[machine.ImageImportRequest, machine.ImageImportResponse]) error {
	if s.Images == nil {
		return errNoImages
	}
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "no archive: the stream ended before its header")
	}
	if err != nil {
		return err
	}
	h := first.GetHeader()
	if h == nil {
		return status.Error(codes.InvalidArgument, "the first message must be the header (file name, size, sha256), not data")
	}
	sum := strings.ToLower(h.Sha256)
	if b, err := hex.DecodeString(sum); sum != "" && (err != nil || len(b) != 32) {
		return status.Errorf(codes.InvalidArgument, "header.sha256: %q is not a SHA-256 in hex (64 characters)", h.Sha256)
	}
	data := &upload{recv: stream.Recv}
	imgs, err := s.Images.Import(stream.Context(), images.Header{FileName: h.FileName, Size: h.Size, SHA256: sum}, data,
		func(p images.Progress) {
			// A failed send means the client is gone: the next receive fails and ends the import.
			_ = stream.Send(&machine.ImageImportResponse{Msg: &machine.ImageImportResponse_Progress{Progress: &machine.ImageImportProgress{
				Phase: p.Phase, Received: p.Received, Size: p.Size, Image: p.Image}}})
		})
	if err != nil {
		return s.imageStatus(err)
	}
	return stream.Send(&machine.ImageImportResponse{Msg: &machine.ImageImportResponse_Result{Result: &machine.ImageImportResult{Images: imageProtos(imgs)}}})
}

// upload reads the archive's bytes from the data messages that follow the header.
type upload struct {
	recv func() (*machine.ImageImportRequest, error)
	buf  []byte
}

// protocolError is a client that breaks the import's protocol.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

func (u *upload) Read(p []byte) (int, error) {
	for len(u.buf) == 0 {
		m, err := u.recv()
		if err != nil {
			return 0, err // io.EOF when the client closed its side: the archive is complete
		}
		if m.GetHeader() != nil {
			return 0, &protocolError{"a second header in the middle of the archive's data"}
		}
		u.buf = m.GetData()
	}
	n := copy(p, u.buf)
	u.buf = u.buf[n:]
	return n, nil
}

// ImageList lists the images of the k8s.io namespace.
func (s *Server) ImageList(ctx context.Context, _ *machine.ImageListRequest) (*machine.ImageListResponse, error) {
	if s.Images == nil {
		return nil, errNoImages
	}
	imgs, err := s.Images.List(ctx)
	if err != nil {
		return nil, s.imageStatus(err)
	}
	return &machine.ImageListResponse{Images: imageProtos(imgs)}, nil
}

// ImageRemove removes images from the k8s.io namespace.
func (s *Server) ImageRemove(ctx context.Context, req *machine.ImageRemoveRequest) (*machine.ImageRemoveResponse, error) {
	if s.Images == nil {
		return nil, errNoImages
	}
	if len(req.Names) == 0 {
		return nil, status.Error(codes.InvalidArgument, "names: give at least one image name")
	}
	for i, n := range req.Names {
		if strings.TrimSpace(n) == "" {
			return nil, status.Errorf(codes.InvalidArgument, "names[%d]: empty", i)
		}
	}
	removed, err := s.Images.Remove(ctx, req.Names, req.Force)
	if err != nil {
		return nil, s.imageStatus(err)
	}
	return &machine.ImageRemoveResponse{Removed: removed}, nil
}

func imageProtos(imgs []images.Image) []*machine.Image {
	out := make([]*machine.Image, len(imgs))
	for i, img := range imgs {
		out[i] = &machine.Image{Name: img.Name, Digest: img.Digest, Size: img.Size, Bundled: img.Bundled, Unpacked: img.Unpacked}
	}
	return out
}

// imageStatus maps the image operations' errors to codes: a bad archive or request is the client's
// (InvalidArgument), a node without containerd or a bundled image is FailedPrecondition, another import
// running is Aborted, a full disk ResourceExhausted.
func (s *Server) imageStatus(err error) error {
	var (
		bad       *images.ArchiveError
		broken    *protocolError
		notUp     *images.NotRunningError
		busy      *images.BusyError
		noSpace   *images.NoSpaceError
		protected *images.ProtectedError
		missing   *images.NotFoundError
	)
	switch {
	case errors.As(err, &bad), errors.As(err, &broken):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &notUp):
		st := s.Node.Status()
		hint := "it starts with the node's workload; try again shortly"
		if st.LockedBy == "" {
			hint = "Init or Join it first"
		}
		return status.Error(codes.FailedPrecondition, fmt.Sprintf("%s (state %s): %s", err, st.State, hint))
	case errors.As(err, &busy):
		return status.Error(codes.Aborted, err.Error())
	case errors.As(err, &noSpace):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.As(err, &protected):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.As(err, &missing):
		return status.Error(codes.NotFound, err.Error())
	}
	return toStatus(err)
}
