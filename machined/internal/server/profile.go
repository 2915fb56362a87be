package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/profile"
)

// Profiler writes machined's own runtime profiles (profile.Runtime).
type Profiler interface {
	Write(ctx context.Context, req profile.Request, w io.Writer) error
}

// Profile streams one of machined's runtime profiles in chunks, the last carrying the SHA-256 of the
// whole, as EtcdSnapshot does, so the client knows it got every byte.
func (s *Server) Profile(req *machine.ProfileRequest, stream grpc.ServerStreamingServer[machine.DataChunk]) error {
	if s.Profiles == nil {
		return status.Error(codes.Unimplemented, "this node serves no profiles")
	}
	h := sha256.New()
	// No buffer yet: a heap profile asked for with gc would otherwise count a chunk allocated for itself.
	w := &chunker{send: stream.Send}
	err := s.Profiles.Write(stream.Context(), profile.Request{Name: req.Name, Seconds: req.Seconds, Debug: int(req.Debug), GC: req.Gc},
		io.MultiWriter(h, w))
	if err == nil {
		err = w.err
	}
	if err != nil {
		return toStatus(err)
	}
	return stream.Send(&machine.DataChunk{Data: w.buf, Sha256: hex.EncodeToString(h.Sum(nil))})
}
