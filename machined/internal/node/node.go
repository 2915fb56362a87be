// Package node is the node's controller: it owns the state machine, the sequence lock and the node lock,
// and runs the boot, init, join, start, reboot, shutdown and reset sequences. The API server calls it; it
// knows nothing of gRPC.
package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/configapply"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/sequence"
	"google.golang.org/protobuf/proto"
)

// System is what the node needs from the machine for power operations. On a real node it syncs, unmounts
// and calls reboot(2); in sandbox mode Reboot is a no-op (the node restarts its sequences in-process) and
// PowerOff ends the process.
type System interface {
	Reboot() error
	PowerOff() error
}

// APIMode switches the machine API between maintenance (self-signed certificate + bootstrap token) and
// mutual TLS against the cluster's machine CA.
type APIMode interface {
	UseMaintenance()
	UseMutualTLS(cert tls.Certificate, clientCAs *x509.CertPool)
}

// Options are the node's dependencies.
type Options struct {
	Paths   paths.Paths
	Bus     *events.Bus
	Log     *slog.Logger
	Sys     System
	API     APIMode
	Sandbox bool
	Now     func() time.Time
	// Hostname is the name before a config sets one.
	Hostname string
	// OnHostname is told the node's name whenever it changes (to set the kernel's hostname and /etc).
	OnHostname func(string)
	// Addresses reports the node's addresses (for its certificate and Status).
	Addresses func() []net.IP
	// Platform looks for the platform's user data (platform.Discover), for an unconfigured node that was
	// not told to join by its kernel command line; nil: the node does not look (sandbox mode).
	Platform func(ctx context.Context) (PlatformAnswer, error)
	// TicketsFor is the ticket client that pins a user data join's CA hash (joinsvc.Client).
	TicketsFor func(caHash string) TicketSource
	// PlatformNetwork applies the network a platform's metadata gives (NoCloud's network-config) at
	// once, in maintenance mode; nil: the node does not own the network.
	PlatformNetwork func(ctx context.Context, n *config.Network) error
	// Join is where a node joins by itself from (cairn.join= / --join); empty: it waits for an operator.
	JoinAddr, JoinToken string
	// JoinCA pins the cluster's machine CA for that join (cairn.joinca=, the hex SHA-256 that cairnctl
	// join-token create prints). Without it the node does not join by itself: anyone on the path could hand
	// it a ticket for their own cluster. JoinCAInsecure skips the check, said out loud.
	JoinCA  string
	Tickets TicketSource
	// Renewer renews a joined worker's machine-API certificate through a control plane.
	Renewer CertRenewer
	// Extensions add tasks to the sequences (disks, Kubernetes); see Hooks.
	Hooks Hooks
	// StartRetry is the first wait before a failed start runs again (retryStart); zero: 15 s.
	StartRetry time.Duration
}

// Node is the controller.
type Node struct {
	o   Options
	fsm *fsm.Machine
	seq fsm.Lock

	mu        sync.Mutex
	lock      *nodelock.Lock
	machine   *config.MachineConfig // the config in force, once locked
	identity  *ecdsa.PrivateKey     // the machine-API key, made at first boot
	lastErr   string
	bootTime  time.Time
	stopJoin  context.CancelFunc
	life      context.Context // ends when the process shuts down
	stateDir  string
	apiMTLS   bool
	hostname  string
	finished  chan struct{} // closed when a shutdown completes
	finishErr error
	// stopRunning ends the Running hook's work and waits for it (nil when none runs).
	stopRunning func()
	// trial times a config applied in try mode.
	trial configapply.Trial
	// selfJoin is the cluster the node joins by itself (nil: it waits for an operator).
	selfJoin *joinTarget
	// platform is the user-data search's progress and outcome (nil: the node does not look).
	platform *machine.PlatformStatus
	// pendingReset is a graceful reset cut short by a power loss, started again once the node is Running.
	pendingReset *ResetOptions
	// startFailures counts the starts that failed in a row (retryStart).
	startFailures int
}

// New makes a node in Boot. Start runs its boot sequence.
func New(o Options) *Node {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Addresses == nil {
		o.Addresses = func() []net.IP { return nil }
	}
	n := &Node{o: o, hostname: o.Hostname, finished: make(chan struct{})}
	n.fsm = fsm.New(func(from, to fsm.State) {
		o.Bus.Publish(events.Event{Kind: events.KindTransition, State: string(to), Outcome: string(to), Message: fmt.Sprintf("%s → %s", from, to)})
		o.Log.Info("state", "from", from, "to", to)
	})
	o.Bus.SetState(func() string { return string(n.fsm.State()) })
	return n
}

// State is the node's current state.
func (n *Node) State() fsm.State { return n.fsm.State() }

// Finished is closed when the node has shut down; Err tells how.
func (n *Node) Finished() <-chan struct{} { return n.finished }

// Status is a snapshot for the Status RPC.
type Status struct {
	State        fsm.State
	LockedBy     string
	MachineType  string
	Hostname     string
	ClusterName  string
	ClusterID    string
	Addresses    []string
	MutualTLS    bool
	Sequence     string
	LastError    string
	BootTime     time.Time
	Sandbox      bool
	PublicKeyPEM []byte
	// Warnings are what the node does that weakens its guarantees (a join without a pinned CA).
	Warnings []string
	// Platform is where the node looked for user data and what it found (nil: it did not look).
	Platform *machine.PlatformStatus
}

// Status reports where the node is.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Status{
		State: n.fsm.State(), Hostname: n.hostname, MutualTLS: n.apiMTLS, Sequence: string(n.seq.Running()),
		LastError: n.lastErr, BootTime: n.bootTime, Sandbox: n.o.Sandbox,
	}
	if n.lock != nil {
		if r := n.lock.Record(); r != nil {
			s.LockedBy = r.Owner
		}
	}
	if n.machine != nil {
		s.MachineType = n.machine.Machine.Type
		s.ClusterName = n.machine.Cluster.Name
		s.ClusterID = n.machine.Cluster.ID
	}
	for _, ip := range n.o.Addresses() {
		s.Addresses = append(s.Addresses, ip.String())
	}
	if n.identity != nil {
		s.PublicKeyPEM, _ = publicKeyPEM(n.identity)
	}
	if t := n.selfJoin; t != nil && t.ca == JoinCAInsecure {
		how := "cairn.joinca=" + JoinCAInsecure
		if t.from != fromCmdline {
			how = "caHash: " + JoinCAInsecure + " in the " + t.from
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("joins %s without checking whom it talks to (%s)", t.addr, how))
	}
	if n.platform != nil {
		s.Platform = proto.Clone(n.platform).(*machine.PlatformStatus)
	}
	return s
}

// Machine returns the config in force, or nil before the lock.
func (n *Node) Machine() *config.MachineConfig {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.machine
}

// setHostname records the node's name and reports a change. Callers hold no lock.
func (n *Node) setHostname(name string) {
	n.mu.Lock()
	changed := n.hostname != name
	n.hostname = name
	n.mu.Unlock()
	if changed && n.o.OnHostname != nil {
		n.o.OnHostname(name)
	}
}

func (n *Node) setErr(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err == nil {
		n.lastErr = ""
		return
	}
	n.lastErr = err.Error()
}

// nodeLock is the node lock, once boot has read it (nil before). Boot sets it, and again after a sandbox
// node's in-process reboot, while RPCs read it: under n.mu.
func (n *Node) nodeLock() *nodelock.Lock {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lock
}

func (n *Node) runner(progress bool) *sequence.Runner {
	r := &sequence.Runner{Bus: n.o.Bus, Log: n.o.Log, Now: n.o.Now}
	if progress {
		r.Progress = n.nodeLock()
	}
	return r
}

// endSequence publishes the end of a sequence, so streams following it know when to stop.
func (n *Node) endSequence(seq fsm.Sequence, err error) {
	e := events.Event{Kind: events.KindSequence, Sequence: string(seq), Outcome: events.Done}
	if err != nil {
		e.Outcome, e.Error = events.Failed, err.Error()
		n.o.Log.Error("sequence failed", "sequence", seq, "error", err)
	}
	n.o.Bus.Publish(e)
	n.setErr(err)
}

// ConfigError is an invalid config; the API maps it to InvalidArgument.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ParseConfig decodes and validates a config, returning a ConfigError listing every problem.
func ParseConfig(raw []byte) (*config.MachineConfig, error) {
	c, err := config.Parse(raw)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	if err := config.Validate(c); err != nil {
		return nil, &ConfigError{Err: err}
	}
	return c, nil
}

// ErrNotLocked is returned by operations that need a configured node.
var ErrNotLocked = errors.New("the node is not configured yet (no Init or Join)")
