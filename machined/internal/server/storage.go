package server

import (
	"context"
	"strings"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/volumes"
)

// Storage answers the disk RPCs (volumes.Manager).
type Storage interface {
	Plan(ctx context.Context, c *config.MachineConfig) (plan.Plan, error)
	Disks(ctx context.Context) ([]inventory.Disk, error)
	Mounts(ctx context.Context, usage volumes.Usage) ([]volumes.Mount, error)
	// SetRecoveryKey hands over the recovery key of the STATE the next Init or Join encrypts.
	SetRecoveryKey(key string)
	// StateEncrypted says STATE is an encrypted volume, opened with the TPM's key.
	StateEncrypted() bool
}

// Plan is a dry run of the disk plan of Init or Join for the given config.
func (s *Server) Plan(ctx context.Context, req *machine.PlanRequest) (*machine.PlanResponse, error) {
	c, err := node.ParseConfig(req.Config)
	if err != nil {
		return nil, toStatus(err)
	}
	p, err := s.Storage.Plan(ctx, c)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &machine.PlanResponse{Ok: p.Err() == nil}
	for _, st := range p.Steps {
		ps := &machine.PlanStep{Volume: strings.ToLower(string(st.Volume)), Action: string(st.Action), Reason: st.Reason, Mountpoint: st.Target}
		switch {
		case st.Action == plan.Tmpfs:
			ps.Disk = "tmpfs"
		case st.Disk != nil:
			ps.Disk = st.Disk.Path
			ps.Found = plan.DescribeContents(*st.Disk)
		}
		resp.Steps = append(resp.Steps, ps)
	}
	return resp, nil
}

// Disks lists the block devices with what is on them.
func (s *Server) Disks(ctx context.Context, _ *machine.DisksRequest) (*machine.DisksResponse, error) {
	disks, err := s.Storage.Disks(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &machine.DisksResponse{}
	for _, d := range disks {
		pd := &machine.Disk{Name: d.Name, Path: d.Path, Size: d.Size, Model: d.Model, Serial: d.Serial, Wwn: d.WWN,
			Rotational: d.Rotational, Removable: d.Removable, ReadOnly: d.ReadOnly, Signatures: signatures(d.Signatures),
			Candidate: d.NotCandidate == "" && d.ProbeError == "", Note: d.NotCandidate, ById: d.ByID, ProbeError: d.ProbeError}
		for _, p := range d.Partitions {
			pd.Partitions = append(pd.Partitions, &machine.Partition{Name: p.Name, Path: p.Path, Size: p.Size, Label: p.Label,
				Signatures: signatures(p.Signatures)})
		}
		resp.Disks = append(resp.Disks, pd)
	}
	return resp, nil
}

func signatures(sigs []probe.Signature) []*machine.Signature {
	var out []*machine.Signature
	for _, s := range sigs {
		out = append(out, &machine.Signature{Type: s.Type, Label: s.Label, Uuid: s.UUID, Offset: uint64(s.Offset)})
	}
	return out
}

// Mounts lists the node's mounts, Cairn volumes named.
func (s *Server) Mounts(ctx context.Context, _ *machine.MountsRequest) (*machine.MountsResponse, error) {
	ms, err := s.Storage.Mounts(ctx, s.Usage)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &machine.MountsResponse{}
	for _, m := range ms {
		resp.Mounts = append(resp.Mounts, &machine.Mount{Source: m.Source, Target: m.Target, Fstype: m.FSType, Options: m.Options,
			Volume: m.Volume, Uuid: m.UUID, Label: m.Label, Size: m.Size, Used: m.Used})
	}
	return resp, nil
}
