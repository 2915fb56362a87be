package server

import (
	"context"
	"github.com/cairn-os/cairn/machined/internal/etcdmember"
	"github.com/cairn-os/cairn/machined/internal/logring"
	"io"
)

// LogSource streams a service's log: a supervised service (containerd, kubelet), machined itself, or a
// Kubernetes static pod's container (kube-apiserver, etcd, ...). tail 0 means everything kept; with
// follow it keeps sending until ctx ends.
type LogSource interface {
	Logs(ctx context.Context, service string, tail int, follow bool, send func(logring.Record) error) error
}

// PreviousLogs is a LogSource that also keeps the log of a container's previous run.
type PreviousLogs interface {
	Previous(ctx context.Context, service string, tail int, send func(logring.Record) error) error
}

// KernelLog streams the kernel's log (/dev/kmsg).
type KernelLog interface {
	Dmesg(ctx context.Context, tail int, follow bool, send func(logring.Record) error) error
}

// EtcdOps are the etcd operations of a control-plane node.
type EtcdOps interface {
	Members(ctx context.Context) ([]etcdmember.Member, error)
	// Snapshot writes a consistent snapshot to w and returns its SHA-256 (hex).
	Snapshot(ctx context.Context, w io.Writer) (string, error)
	// RemoveMember removes member who (a name or a hex ID), refusing the member named self.
	RemoveMember(ctx context.Context, who, self string) (etcdmember.Member, error)
}
