package server

import (
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/logring"
)

// Logs streams a service's log: the last req.Tail lines (0: all kept) and, with req.Follow, each later one
// until the client leaves; with req.Previous, a container's run before its latest restart.
func (s *Server) Logs(req *machine.LogsRequest, stream grpc.ServerStreamingServer[machine.LogLine]) error {
	if s.LogSource == nil {
		return status.Error(codes.Unimplemented, "this node serves no service logs (machined runs without a log source)")
	}
	if req.Service == "" {
		return status.Error(codes.InvalidArgument, "service: required (e.g. machined, containerd, kubelet, kube-apiserver)")
	}
	if req.Previous {
		prev, ok := s.LogSource.(PreviousLogs)
		switch {
		case req.Follow:
			return status.Error(codes.InvalidArgument, "previous and follow do not go together: a previous run's log does not grow")
		case !ok:
			return status.Error(codes.Unimplemented, "this node keeps no logs of previous runs")
		}
		return logStatus(stream, prev.Previous(stream.Context(), req.Service, int(req.Tail), sendLine(stream)))
	}
	err := s.LogSource.Logs(stream.Context(), req.Service, int(req.Tail), req.Follow, sendLine(stream))
	return logStatus(stream, err)
}

// Dmesg streams the kernel's log: the last req.Tail records (0: all kept) and, with req.Follow, each later
// one until the client leaves.
func (s *Server) Dmesg(req *machine.DmesgRequest, stream grpc.ServerStreamingServer[machine.LogLine]) error {
	if s.KernelLog == nil {
		return status.Error(codes.Unimplemented, "this node serves no kernel log (machined runs without one)")
	}
	err := s.KernelLog.Dmesg(stream.Context(), int(req.Tail), req.Follow, sendLine(stream))
	return logStatus(stream, err)
}

func sendLine(stream grpc.ServerStreamingServer[machine.LogLine]) func(logring.Record) error {
	return func(l logring.Record) error {
		// A service may print any bytes; a protobuf string must be UTF-8 or the message fails to encode.
		p := &machine.LogLine{Service: l.Service, Line: strings.ToValidUTF8(l.Line, "\uFFFD")}
		if !l.Time.IsZero() {
			p.Time = timestamppb.New(l.Time)
		}
		return stream.Send(p)
	}
}

// logStatus maps a log source's error: an unknown service is NotFound; a client that left ends the stream
// quietly.
func logStatus(stream grpc.ServerStream, err error) error {
	if err == nil || stream.Context().Err() != nil {
		return nil
	}
	var notFound interface{ NotFound() }
	if errors.As(err, &notFound) {
		return status.Error(codes.NotFound, err.Error())
	}
	return toStatus(err)
}
