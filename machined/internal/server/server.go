// Package server is the machine API's gRPC edge: it authenticates each call, decodes the request, calls the
// node controller and maps errors to gRPC codes. Nothing else happens here.
package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/joinsvc"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
	"github.com/cairn-os/cairn/machined/internal/proc"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
	"github.com/cairn-os/cairn/machined/internal/timesync"
	"github.com/cairn-os/cairn/machined/internal/tpm"
	"github.com/cairn-os/cairn/machined/internal/volumes"
)

// Services lists and controls the node's supervised services.
type Services interface {
	List() []supervisor.Info
}

// Server implements the Machine service.
type Server struct {
	machine.UnimplementedMachineServer
	Node       *node.Node
	Bus        *events.Bus
	Supervise  ServiceControl
	Storage    Storage
	Kube       Kubernetes
	LogSource  LogSource    // service, machined and pod logs (nil: Unimplemented)
	KernelLog  KernelLog    // the kernel's ring buffer (nil: Unimplemented)
	EtcdOps    EtcdOps      // etcd membership and snapshots on control planes (nil: Unimplemented)
	Images     Images       // container images in containerd's k8s.io namespace (nil: Unimplemented)
	Certs      Certificates // the node's Kubernetes certificates (nil: Unimplemented)
	JoinTokens JoinTokens
	// JoinPort is the join service's port, which new tokens advertise (0: client.JoinPort).
	JoinPort int
	Usage    volumes.Usage
	Build    Build
	// Memory is a process's resident memory, pid 0 being machined (proc.ResidentMemory; nil: not
	// reported).
	Memory func(pid int) proc.Memory
	// Profiles are machined's own runtime profiles (nil: Unimplemented).
	Profiles Profiler
	// Network is the node's network configurator (nil in sandbox mode: the network is the host's).
	Network Network
	// Clock reports the clock's sync state; false or nil: the node keeps the machine's clock.
	Clock func() (timesync.State, bool)
	// TPM reports the TPM and the measured lock; false or nil: the node does not own a TPM (sandbox mode).
	TPM func() (tpm.State, bool)
	// PCRs reads the TPM's PCRs and this boot's measurement log (nil in sandbox mode).
	PCRs func(pcrs []int) ([][]byte, tpm.Log, error)
	// Attest opens the TPM's attestation keys for TPMAttest (nil in sandbox mode; tpm.ErrNoTPM without a
	// TPM).
	Attest func() (joinsvc.Attester, error)
	// Warnings are the node's conditions to show in status besides the node's own (a full volume);
	// nil: none.
	Warnings func() []string
	// Watchdog stops the petting of the watchdog and returns its timeout; false (or nil) when
	// none is armed.
	Watchdog func() (time.Duration, bool)
	// Upgrader writes upgrades into the boot slots and rolls back (nil: Unimplemented).
	Upgrader Upgrader
	// Installer writes Cairn onto a disk from the live medium (nil: Unimplemented).
	Installer Installer
}

// Build identifies the running binary.
type Build struct {
	Version, Commit string
}

// New builds the gRPC server with authentication, health and reflection; extra options (a stats handler
// in tests) come last.
func New(s *Server, auth *Auth, extra ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(append([]grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(auth.Creds.TLSConfig())),
		grpc.InTapHandle(auth.Tap),
		grpc.MaxRecvMsgSize(client.MaxMessageSize),
		grpc.KeepaliveEnforcementPolicy(client.ServerKeepalivePolicy()),
		grpc.KeepaliveParams(client.ServerKeepalive()),
	}, extra...)...)
	machine.RegisterMachineServer(g, s)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(machine.Machine_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, h)
	reflection.Register(g)
	return g
}

// Version reports the build.
func (s *Server) Version(ctx context.Context, _ *machine.VersionRequest) (*machine.VersionResponse, error) {
	resp := &machine.VersionResponse{Version: s.Build.Version, Commit: s.Build.Commit, GoVersion: runtime.Version(),
		KubernetesVersion: config.KubernetesVersion, Arch: runtime.GOARCH}
	if s.Upgrader != nil {
		var err error
		if resp.Slots, err = s.Upgrader.Slots(ctx); err != nil {
			resp.SlotsNote = err.Error()
		}
	}
	return resp, nil
}

// Status reports the node's state.
func (s *Server) Status(context.Context, *machine.StatusRequest) (*machine.StatusResponse, error) {
	st := s.Node.Status()
	mode := "maintenance"
	if st.MutualTLS {
		mode = "mtls"
	}
	r := &machine.StatusResponse{
		State: string(st.State), LockedBy: st.LockedBy, MachineType: st.MachineType, Hostname: st.Hostname,
		ClusterName: st.ClusterName, ClusterId: st.ClusterID, Addresses: st.Addresses, ApiMode: mode,
		Sequence: st.Sequence, LastError: st.LastError, Sandbox: st.Sandbox, MachinePublicKey: st.PublicKeyPEM,
		Warnings: st.Warnings, Platform: st.Platform,
	}
	if s.Warnings != nil {
		r.Warnings = append(r.Warnings, s.Warnings()...)
	}
	if !st.BootTime.IsZero() {
		r.BootTime = timestamppb.New(st.BootTime)
	}
	if s.Memory != nil {
		m := s.Memory(0)
		r.MachinedRssBytes, r.MachinedRssAnonBytes, r.MachinedRssFileBytes = m.RSS, m.Anon, m.File
	}
	if s.Network != nil {
		r.Network = networkStatus(s.Network)
	}
	if s.Clock != nil {
		if st, ok := s.Clock(); ok {
			r.Clock = clockStatus(st)
		}
	}
	if s.TPM != nil {
		if t, ok := s.TPM(); ok {
			r.Tpm = &machine.TPMStatus{Present: t.Present, Measured: t.Measured, Agrees: t.Agrees, Pcr: tpm.PCR, PcrValue: t.PCR, Error: t.Error,
				StateEncrypted: s.Storage != nil && s.Storage.StateEncrypted()}
		}
	}
	return r, nil
}

// Init takes the lock for Init and streams the sequence's events.
func (s *Server) Init(req *machine.InitRequest, stream grpc.ServerStreamingServer[machine.Event]) error {
	return s.follow(stream, fsm.SeqInit, req.Detach, func() error {
		s.recoveryKey(req.StateRecoveryKey)
		return s.Node.Init(stream.Context(), req.Config, req.EtcdSnapshot)
	})
}

// Join takes the lock for Join with a ticket and streams the sequence's events.
func (s *Server) Join(req *machine.JoinRequest, stream grpc.ServerStreamingServer[machine.Event]) error {
	return s.follow(stream, fsm.SeqJoin, req.Detach, func() error {
		s.recoveryKey(req.StateRecoveryKey)
		return s.Node.Join(stream.Context(), req.Config, req.Ticket)
	})
}

// recoveryKey hands the request's recovery key (or none) to the volumes, for the STATE this sequence
// may encrypt.
func (s *Server) recoveryKey(key string) {
	if s.Storage != nil {
		s.Storage.SetRecoveryKey(key)
	}
}

// follow starts a sequence and streams its events until it ends. It subscribes first so no event is missed.
func (s *Server) follow(stream grpc.ServerStreamingServer[machine.Event], seq fsm.Sequence, detach bool, start func() error) error {
	_, ch, cancel := s.Bus.Subscribe(1)
	defer cancel()
	if err := start(); err != nil {
		return toStatus(err)
	}
	if detach {
		return nil
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case e, ok := <-ch:
			if !ok {
				return status.Error(codes.ResourceExhausted, "event stream fell behind; follow with `cairnctl events --follow`")
			}
			if e.Sequence != string(seq) && e.Kind != events.KindTransition {
				continue
			}
			if err := stream.Send(toProto(e)); err != nil {
				return err
			}
			if e.Kind == events.KindSequence && e.Sequence == string(seq) {
				if e.Outcome == events.Failed {
					return status.Errorf(codes.Aborted, "%s failed: %s", seq, e.Error)
				}
				return nil
			}
		}
	}
}

// Events streams the kept events and, with follow, every later one.
func (s *Server) Events(req *machine.EventsRequest, stream grpc.ServerStreamingServer[machine.Event]) error {
	hist, ch, cancel := s.Bus.Subscribe(int(req.Tail))
	defer cancel()
	for _, e := range hist {
		if err := stream.Send(toProto(e)); err != nil {
			return err
		}
	}
	if !req.Follow {
		return nil
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case e, ok := <-ch:
			if !ok {
				return status.Error(codes.ResourceExhausted, "event stream fell behind; reconnect")
			}
			if err := stream.Send(toProto(e)); err != nil {
				return err
			}
		}
	}
}

// Reboot reboots the node.
func (s *Server) Reboot(ctx context.Context, _ *machine.RebootRequest) (*machine.RebootResponse, error) {
	return &machine.RebootResponse{}, toStatus(s.Node.Reboot(ctx))
}

// Shutdown powers the node off.
func (s *Server) Shutdown(ctx context.Context, _ *machine.ShutdownRequest) (*machine.ShutdownResponse, error) {
	return &machine.ShutdownResponse{}, toStatus(s.Node.Shutdown(ctx))
}

// Reset wipes the node and reboots it into Boot.
func (s *Server) Reset(ctx context.Context, req *machine.ResetRequest) (*machine.ResetResponse, error) {
	wipe, err := resetWipe(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	err = s.Node.Reset(ctx, node.ResetOptions{Wipe: wipe, Graceful: req.Graceful, NoReboot: req.NoReboot})
	return &machine.ResetResponse{}, toStatus(err)
}

// resetWipe is the volumes a reset wipes (default STATE and EPHEMERAL). A graceful reset takes the node out
// of its cluster (its etcd member, its Node), so it must wipe STATE, which holds the node's lock and
// identity: a node that kept them would boot back as a member the cluster no longer has.
func resetWipe(req *machine.ResetRequest) ([]string, error) {
	wipe := req.Wipe
	if len(wipe) == 0 {
		wipe = []string{"state", "ephemeral"}
	}
	for i, w := range wipe {
		switch w {
		case "all":
			wipe = []string{"state", "ephemeral", "etcd"}
		case "state", "ephemeral", "etcd":
		default:
			return nil, fmt.Errorf("wipe[%d]: %q is not a volume (state, ephemeral, etcd or all)", i, w)
		}
	}
	if req.Graceful && !slices.Contains(wipe, "state") {
		return nil, fmt.Errorf("a graceful reset takes the node out of its cluster, so it must wipe state (the node's lock and identity): add state to the volumes to wipe, or reset with graceful off (cairnctl reset --graceful=false) to wipe %s and keep the node a member",
			strings.Join(wipe, ", "))
	}
	return wipe, nil
}

// Services lists supervised services.
func (s *Server) Services(context.Context, *machine.ServicesRequest) (*machine.ServicesResponse, error) {
	resp := &machine.ServicesResponse{}
	for _, i := range s.Supervise.List() {
		resp.Services = append(resp.Services, s.serviceProto(i))
	}
	return resp, nil
}

func (s *Server) serviceProto(i supervisor.Info) *machine.Service {
	p := &machine.Service{Name: i.Name, State: i.State, Health: i.Health, Restarts: i.Restarts, LastError: i.LastError, Pid: int32(i.PID)}
	if !i.Since.IsZero() {
		p.Since = timestamppb.New(i.Since)
	}
	if s.Memory != nil && i.PID > 0 {
		p.RssBytes = s.Memory(i.PID).RSS
	}
	return p
}

func toProto(e events.Event) *machine.Event {
	p := &machine.Event{Id: e.ID, Time: timestamppb.New(e.Time), State: e.State, Sequence: e.Sequence, Task: e.Task,
		Kind: e.Kind, Outcome: e.Outcome, Error: e.Error, Message: e.Message}
	if !e.Started.IsZero() {
		p.Started = timestamppb.New(e.Started)
	}
	return p
}

// toStatus maps the node's errors to gRPC codes; this is the only place that does.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var (
		cfgErr  *node.ConfigError
		held    *nodelock.HeldError
		busy    *fsm.BusyError
		trans   *fsm.TransitionError
		planErr *volumes.PlanError
		already interface{ GRPCStatus() *status.Status }
		precond interface{ Precondition() }
		missing interface{ NotFound() }
		down    interface{ Unavailable() }
		invalid interface{ InvalidArgument() }
	)
	switch {
	case errors.As(err, &already):
		return err
	case errors.As(err, &cfgErr), errors.As(err, &invalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &held), errors.As(err, &busy):
		return status.Error(codes.Aborted, err.Error())
	case errors.As(err, &trans), errors.As(err, &planErr), errors.As(err, &precond), errors.Is(err, node.ErrNotLocked):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.As(err, &missing):
		return status.Error(codes.NotFound, err.Error())
	case errors.As(err, &down):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
