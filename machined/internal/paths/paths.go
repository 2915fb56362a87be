// Package paths is the node's file layout. Every path machined uses comes from here, relative to a root:
// "/" on a real node, a scratch directory in sandbox mode (machined --root DIR), so the same code runs in
// both.
package paths

import "path/filepath"

// Paths resolves the layout under Root.
type Paths struct {
	Root string
}

// Join resolves a path under the root.
func (p Paths) Join(elem ...string) string {
	return filepath.Join(append([]string{p.rootOrSlash()}, elem...)...)
}

func (p Paths) rootOrSlash() string {
	if p.Root == "" {
		return "/"
	}
	return p.Root
}

// State is where the STATE volume is mounted: the machine config, the node lock, the node identity.
func (p Paths) State() string { return p.Join("system", "state") }

// RunState is the tmpfs STATE used until the STATE disk is mounted.
func (p Paths) RunState() string { return p.Join("run", "cairn", "state") }

// PKI is where the node keeps its machine-API identity.
func (p Paths) PKI(state string) string { return filepath.Join(state, "pki") }

// Var is the EPHEMERAL volume.
func (p Paths) Var() string { return p.Join("var") }

// Etcd is the ETCD volume.
func (p Paths) Etcd() string { return p.Join("var", "lib", "etcd") }

// Kubernetes is /etc/kubernetes.
func (p Paths) Kubernetes() string { return p.Join("etc", "kubernetes") }

// Run is machined's runtime directory.
func (p Paths) Run() string { return p.Join("run", "cairn") }

// Logs is where service logs are written once EPHEMERAL is mounted.
func (p Paths) Logs() string { return p.Join("var", "log", "cairn") }
