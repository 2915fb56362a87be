package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

// ServiceControl starts and stops supervised services (supervisor.Supervisor).
type ServiceControl interface {
	Services
	Service(name string) (supervisor.Service, bool)
	Start(svc supervisor.Service)
	Stop(ctx context.Context, name string) error
	Info(name string) (supervisor.Info, bool)
}

// ServiceStart starts a stopped service again.
func (s *Server) ServiceStart(ctx context.Context, req *machine.ServiceRequest) (*machine.ServiceResponse, error) {
	svc, err := s.service(req.Name)
	if err != nil {
		return nil, err
	}
	s.Supervise.Start(svc)
	return s.serviceInfo(ctx, req.Name, supervisor.StateRunning)
}

// ServiceStop stops a service; it stays stopped (no restart) until started again or the node reboots.
func (s *Server) ServiceStop(ctx context.Context, req *machine.ServiceRequest) (*machine.ServiceResponse, error) {
	if _, err := s.service(req.Name); err != nil {
		return nil, err
	}
	if err := s.Supervise.Stop(ctx, req.Name); err != nil {
		return nil, toStatus(err)
	}
	return s.serviceInfo(ctx, req.Name, "")
}

// ServiceRestart stops a service and starts it again.
func (s *Server) ServiceRestart(ctx context.Context, req *machine.ServiceRequest) (*machine.ServiceResponse, error) {
	svc, err := s.service(req.Name)
	if err != nil {
		return nil, err
	}
	if err := s.Supervise.Stop(ctx, req.Name); err != nil {
		return nil, toStatus(err)
	}
	s.Supervise.Start(svc)
	return s.serviceInfo(ctx, req.Name, supervisor.StateRunning)
}

func (s *Server) service(name string) (supervisor.Service, error) {
	svc, ok := s.Supervise.Service(name)
	if !ok {
		var names []string
		for _, i := range s.Supervise.List() {
			names = append(names, i.Name)
		}
		return svc, status.Errorf(codes.NotFound, "no service %q that can be started or stopped (services: %v; machined and apid are not)", name, names)
	}
	return svc, nil
}

// serviceInfo reports the service, waiting briefly for it to reach want (a start takes a moment).
func (s *Server) serviceInfo(ctx context.Context, name, want string) (*machine.ServiceResponse, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		i, ok := s.Supervise.Info(name)
		if !ok {
			return nil, toStatus(errors.New("service vanished"))
		}
		if want == "" || i.State == want || time.Now().After(deadline) || ctx.Err() != nil {
			return &machine.ServiceResponse{Service: s.serviceProto(i)}, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}
