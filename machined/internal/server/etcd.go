package server

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/etcdmember"
)

// EtcdMembers lists the etcd cluster's members as this node's member sees them.
func (s *Server) EtcdMembers(ctx context.Context, _ *machine.EtcdMembersRequest) (*machine.EtcdMembersResponse, error) {
	if s.EtcdOps == nil {
		return nil, status.Error(codes.Unimplemented, "this node serves no etcd operations (machined runs without them)")
	}
	ms, err := s.EtcdOps.Members(ctx)
	if err != nil {
		return nil, etcdStatus(err)
	}
	return &machine.EtcdMembersResponse{Members: etcdMembers(ms)}, nil
}

// EtcdRemoveMember removes the member of a node that is gone, refusing this node's own.
func (s *Server) EtcdRemoveMember(ctx context.Context, req *machine.EtcdRemoveMemberRequest) (*machine.EtcdRemoveMemberResponse, error) {
	if s.EtcdOps == nil {
		return nil, status.Error(codes.Unimplemented, "this node serves no etcd operations (machined runs without them)")
	}
	if req.Member == "" {
		return nil, status.Error(codes.InvalidArgument, "member: name the member to remove (its name or hex ID, as etcd members shows them)")
	}
	removed, err := s.EtcdOps.RemoveMember(ctx, req.Member, s.Node.Status().Hostname)
	if err != nil {
		return nil, etcdStatus(err)
	}
	resp := &machine.EtcdRemoveMemberResponse{Removed: etcdMembers([]etcdmember.Member{removed})[0]}
	if ms, err := s.EtcdOps.Members(ctx); err == nil {
		resp.Members = etcdMembers(ms)
	}
	return resp, nil
}

func etcdMembers(ms []etcdmember.Member) []*machine.EtcdMember {
	out := make([]*machine.EtcdMember, 0, len(ms))
	for _, m := range ms {
		out = append(out, &machine.EtcdMember{Id: m.ID, Name: m.Name, PeerUrls: m.PeerURLs,
			ClientUrls: m.ClientURLs, IsLearner: m.IsLearner, IsLeader: m.IsLeader})
	}
	return out
}

// SnapshotChunk bounds the data of one DataChunk.
const SnapshotChunk = 1 << 20

// EtcdSnapshot streams a consistent etcd snapshot in chunks of at most SnapshotChunk bytes; the last
// chunk carries the SHA-256 of everything sent, which the client checks before it keeps the file.
func (s *Server) EtcdSnapshot(_ *machine.EtcdSnapshotRequest, stream grpc.ServerStreamingServer[machine.DataChunk]) error {
	if s.EtcdOps == nil {
		return status.Error(codes.Unimplemented, "this node serves no etcd operations (machined runs without them)")
	}
	w := &chunker{send: stream.Send, buf: make([]byte, 0, SnapshotChunk)}
	sum, err := s.EtcdOps.Snapshot(stream.Context(), w)
	if err == nil {
		err = w.err
	}
	if err != nil {
		if stream.Context().Err() != nil {
			return status.FromContextError(stream.Context().Err()).Err()
		}
		return etcdStatus(err)
	}
	return stream.Send(&machine.DataChunk{Data: w.buf, Sha256: sum})
}

// chunker cuts what is written to it into DataChunks, keeping the last (possibly partial) one back so the
// checksum can travel with it.
type chunker struct {
	send func(*machine.DataChunk) error
	buf  []byte
	err  error // the first failed send: the stream is broken, so later writes fail too
}

func (c *chunker) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n := len(p)
	for len(p) > 0 {
		if len(c.buf) == SnapshotChunk {
			if c.err = c.send(&machine.DataChunk{Data: c.buf}); c.err != nil {
				return n - len(p), c.err
			}
			// A sent message may still be read (gRPC's stats handlers may use it lazily): a new buffer.
			c.buf = make([]byte, 0, SnapshotChunk)
		}
		k := min(len(p), SnapshotChunk-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p = p[k:]
	}
	return n, nil
}

// etcdStatus maps etcd's errors: no etcd on this node is FailedPrecondition (toStatus's rule), an etcd that
// does not answer is Unavailable.
func etcdStatus(err error) error {
	var unavailable interface{ Unavailable() }
	if errors.As(err, &unavailable) {
		return status.Error(codes.Unavailable, err.Error())
	}
	return toStatus(err)
}
