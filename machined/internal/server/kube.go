package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/health"
)

// Kubernetes answers the Kubernetes RPCs (workload.Workload).
type Kubernetes interface {
	Health(ctx context.Context) []health.Check
	AdminKubeconfig() ([]byte, error)
}

// Health runs the node's Kubernetes health checks.
func (s *Server) Health(ctx context.Context, _ *machine.HealthRequest) (*machine.HealthResponse, error) {
	if s.Kube == nil {
		return nil, status.Error(codes.FailedPrecondition, "this node runs no Kubernetes")
	}
	resp := &machine.HealthResponse{Ok: true}
	for _, c := range s.Kube.Health(ctx) {
		hc := &machine.HealthCheck{Name: c.Name, Ok: c.Err == nil, Message: c.Message}
		if c.Err != nil {
			hc.Message = c.Err.Error()
			resp.Ok = false
		}
		resp.Checks = append(resp.Checks, hc)
	}
	return resp, nil
}

// Kubeconfig returns an admin kubeconfig for the cluster endpoint, with a fresh client certificate.
func (s *Server) Kubeconfig(context.Context, *machine.KubeconfigRequest) (*machine.KubeconfigResponse, error) {
	if s.Kube == nil {
		return nil, status.Error(codes.FailedPrecondition, "this node runs no Kubernetes")
	}
	kc, err := s.Kube.AdminKubeconfig()
	if err != nil {
		return nil, toStatus(err)
	}
	return &machine.KubeconfigResponse{Kubeconfig: kc}, nil
}
