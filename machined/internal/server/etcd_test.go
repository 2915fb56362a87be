package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/etcdmember"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

type unavailable struct{ msg string }

func (e unavailable) Error() string { return e.msg }
func (unavailable) Unavailable()    {}

// fakeEtcd writes data in writes of uneven sizes, as a network stream does; failAfter > 0 breaks the
// snapshot after that many bytes.
type fakeEtcd struct {
	members   []etcdmember.Member
	data      []byte
	err       error
	failAfter int
}

func (f *fakeEtcd) Members(context.Context) ([]etcdmember.Member, error) { return f.members, f.err }

// RemoveMember removes who by name, refusing self as etcdops does.
func (f *fakeEtcd) RemoveMember(_ context.Context, who, self string) (etcdmember.Member, error) {
	if f.err != nil {
		return etcdmember.Member{}, f.err
	}
	if who == self {
		return etcdmember.Member{}, precondition{"member " + self + " is this node's own: reset the node instead"}
	}
	for i, m := range f.members {
		if m.Name == who {
			f.members = append(f.members[:i:i], f.members[i+1:]...)
			return m, nil
		}
	}
	return etcdmember.Member{}, notFound{"etcd has no member " + who}
}

// TestEtcdRemoveMember checks the RPC's mapping: the node's own name is passed as the member to refuse,
// refusals and unknown members keep their codes, and the answer lists the members left.
func TestEtcdRemoveMember(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, member string
		want         []string // the members left
		code         codes.Code
	}{
		{"a gone node", "cp2", []string{"cp1", "cp3"}, codes.OK},
		{"unknown", "cp9", nil, codes.NotFound},
		{"empty", "", nil, codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			etcd := &fakeEtcd{members: []etcdmember.Member{{ID: 1, Name: "cp1", IsLeader: true}, {ID: 2, Name: "cp2"}, {ID: 3, Name: "cp3"}}}
			r, err := maintenanceClient(t, serveDay2(t, nil, nil, etcd)).EtcdRemoveMember(ctx, &machine.EtcdRemoveMemberRequest{Member: tc.member})
			if code(err) != tc.code {
				t.Fatalf("EtcdRemoveMember(%q) = %v, want code %v", tc.member, err, tc.code)
			}
			var left []string
			for _, m := range r.GetMembers() {
				left = append(left, m.Name)
			}
			if diff := cmp.Diff(tc.want, left); diff != "" {
				t.Errorf("members left (-want +got):\n%s", diff)
			}
			if tc.code == codes.OK && r.GetRemoved().GetName() != tc.member {
				t.Errorf("removed = %v, want %s", r.GetRemoved(), tc.member)
			}
		})
	}
}

func (f *fakeEtcd) Snapshot(_ context.Context, w io.Writer) (string, error) {
	if f.err != nil {
		return "", f.err
	}
	h := sha256.New()
	r := rand.New(rand.NewPCG(1, 2))
	for off := 0; off < len(f.data); {
		n := min(len(f.data)-off, 1+r.IntN(300<<10))
		if f.failAfter > 0 && off+n > f.failAfter {
			return "", errors.New("etcd went away")
		}
		if _, err := w.Write(f.data[off : off+n]); err != nil {
			return "", err
		}
		h.Write(f.data[off : off+n])
		off += n
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func TestEtcdMembers(t *testing.T) {
	members := []etcdmember.Member{{ID: 0x8e9e05c52164694d, Name: "cp1", PeerURLs: []string{"https://10.0.0.1:2380"},
		ClientURLs: []string{"https://10.0.0.1:2379"}}, {ID: 2, Name: "cp2", IsLearner: true}}
	ctx := context.Background()
	tests := []struct {
		name string
		etcd *fakeEtcd
		want []string
		code codes.Code
	}{
		{"members", &fakeEtcd{members: members}, []string{"cp1 8e9e05c52164694d https://10.0.0.1:2380 false", "cp2 2  true"}, codes.OK},
		{"worker", &fakeEtcd{err: precondition{"etcd does not run on this node"}}, nil, codes.FailedPrecondition},
		{"etcd down", &fakeEtcd{err: unavailable{"etcd at https://127.0.0.1:2379 does not answer"}}, nil, codes.Unavailable},
		{"other", &fakeEtcd{err: errors.New("boom")}, nil, codes.Internal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := maintenanceClient(t, serveDay2(t, nil, nil, tc.etcd)).EtcdMembers(ctx, &machine.EtcdMembersRequest{})
			if code(err) != tc.code {
				t.Fatalf("EtcdMembers() = %v, want code %v", err, tc.code)
			}
			var got []string
			for _, m := range r.GetMembers() {
				got = append(got, fmt.Sprintf("%s %x %s %t", m.Name, m.Id, strings.Join(m.PeerUrls, ","), m.IsLearner))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("EtcdMembers() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEtcdSnapshotChunks(t *testing.T) {
	data := make([]byte, 2*SnapshotChunk+12345)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	tests := []struct {
		name  string
		data  []byte
		sizes []int
	}{
		{"several chunks", data, []int{SnapshotChunk, SnapshotChunk, 12345}},
		{"exactly one chunk", data[:SnapshotChunk], []int{SnapshotChunk}},
		{"small", data[:10], []int{10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := maintenanceClient(t, serveDay2(t, nil, nil, &fakeEtcd{data: tc.data})).EtcdSnapshot(context.Background(), &machine.EtcdSnapshotRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			var sizes []int
			var sum string
			for {
				c, err := s.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("EtcdSnapshot() = %v", err)
				}
				if sum != "" {
					t.Fatalf("a chunk after the one with the checksum")
				}
				sizes = append(sizes, len(c.Data))
				got.Write(c.Data)
				sum = c.Sha256
			}
			if diff := cmp.Diff(tc.sizes, sizes); diff != "" {
				t.Errorf("chunk sizes mismatch (-want +got):\n%s", diff)
			}
			want := sha256.Sum256(tc.data)
			if !bytes.Equal(got.Bytes(), tc.data) || sum != hex.EncodeToString(want[:]) {
				t.Errorf("EtcdSnapshot() sent %d bytes with sha256 %q, want the %d bytes with %x", got.Len(), sum, len(tc.data), want)
			}
		})
	}
}

func TestEtcdSnapshotFailureReachesTheClient(t *testing.T) {
	data := make([]byte, 3*SnapshotChunk)
	s, err := maintenanceClient(t, serveDay2(t, nil, nil, &fakeEtcd{data: data, failAfter: 2 * SnapshotChunk})).EtcdSnapshot(context.Background(), &machine.EtcdSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		c, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "etcd went away") {
				t.Fatalf("EtcdSnapshot() ended with %v, want the snapshot's error", err)
			}
			return
		}
		if c.Sha256 != "" {
			t.Fatal("a broken snapshot sent a checksum: the client would keep a partial file")
		}
	}
}

func TestDay2RolesAfterTheLock(t *testing.T) {
	src := &fakeLogs{lines: map[string][]string{"machined": {"x"}}}
	s := serveDay2(t, src, fakeKernel{lines: []string{"k"}}, &fakeEtcd{data: []byte("snap")})
	c := testcluster.New(t)
	initNode(t, s, c)
	ctx := context.Background()
	as := func(role string) machine.MachineClient {
		cert, key := c.ClientContext(t, role)
		return dial(t, client.Options{Endpoint: s.addr, Context: &client.Context{CA: c.Secrets.MachineCA.Cert, Cert: string(cert), Key: string(key)}})
	}
	tests := []struct {
		role string
		call string
		want codes.Code
	}{
		{client.RoleReader, "Logs", codes.OK},
		{client.RoleReader, "Dmesg", codes.OK},
		{client.RoleReader, "EtcdMembers", codes.OK},
		{client.RoleReader, "EtcdSnapshot", codes.PermissionDenied},
		{client.RoleOperator, "EtcdSnapshot", codes.PermissionDenied},
		{client.RoleAdmin, "EtcdSnapshot", codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.role+" "+tc.call, func(t *testing.T) {
			mc := as(tc.role)
			var err error
			switch tc.call {
			case "Logs":
				var st machine.Machine_LogsClient
				if st, err = mc.Logs(ctx, &machine.LogsRequest{Service: "machined"}); err == nil {
					_, err = st.Recv()
				}
			case "Dmesg":
				var st machine.Machine_DmesgClient
				if st, err = mc.Dmesg(ctx, &machine.DmesgRequest{}); err == nil {
					_, err = st.Recv()
				}
			case "EtcdMembers":
				_, err = mc.EtcdMembers(ctx, &machine.EtcdMembersRequest{})
			case "EtcdSnapshot":
				var st machine.Machine_EtcdSnapshotClient
				if st, err = mc.EtcdSnapshot(ctx, &machine.EtcdSnapshotRequest{}); err == nil {
					_, err = st.Recv()
				}
			}
			if code(err) != tc.want {
				t.Fatalf("%s as %s = %v, want code %v", tc.call, tc.role, err, tc.want)
			}
		})
	}
}
