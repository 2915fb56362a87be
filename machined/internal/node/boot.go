package node

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
	"github.com/cairn-os/cairn/machined/internal/sequence"
)

// Start runs the boot sequence. life ends when the process shuts down; every sequence runs under it.
func (n *Node) Start(life context.Context) error {
	n.life = life
	return n.boot()
}

// boot finds STATE, reads the node lock and decides: a configured node takes the Running path, a node cut
// short in Init or Join resumes it, and a fresh node serves the maintenance API (and joins by itself when
// the kernel command line says where).
func (n *Node) boot() error {
	ctx, release, err := n.seq.Acquire(n.life, n.life, fsm.SeqBoot)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.bootTime = n.o.Now()
	n.stateDir = n.o.Paths.State()
	n.machine = nil
	n.hostname = n.o.Hostname
	n.mu.Unlock()
	if n.o.Hostname != "" && n.o.OnHostname != nil {
		n.o.OnHostname(n.o.Hostname)
	}

	var lock *nodelock.Lock
	tasks := n.o.Hooks.storage(nil, fsm.SeqBoot, n.setStateDir)
	tasks = append(tasks,
		sequence.Task{Name: "open-node-lock", Run: func(context.Context) error {
			dir := n.StateDir()
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("create STATE directory: %w", err)
			}
			l, err := nodelock.Open(dir, n.o.Now)
			lock = l
			return err
		}},
		sequence.Task{Name: "node-identity", Run: func(context.Context) error { return n.loadIdentity(n.StateDir()) }},
	)
	err = n.runner(false).Run(ctx, string(fsm.SeqBoot), tasks)
	n.endSequence(fsm.SeqBoot, err) // before the release: a status without a sequence has its outcome
	release()
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.lock = lock
	n.mu.Unlock()

	rec := lock.Record()
	if rec == nil {
		n.o.API.UseMaintenance()
		n.o.Log.Info("node is not configured: serving the maintenance API; waiting for Init or Join")
		n.startJoinClient()
		n.startPlatform()
		return nil
	}
	if rec.Complete && rec.Reset == nil {
		n.applyStaged()
	}
	raw, err := lock.Config()
	if err != nil {
		n.setErr(err)
		return err
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		err = fmt.Errorf("the config stored with the node lock no longer validates: %w", err)
		n.setErr(err)
		return err
	}
	n.mu.Lock()
	n.machine = cfg
	n.mu.Unlock()
	if cfg.Machine.Hostname != "" {
		n.setHostname(cfg.Machine.Hostname)
	}
	switch {
	case rec.Reset != nil:
		return n.resumeReset(cfg, rec)
	case rec.Complete:
		n.o.Log.Info("node lock is complete: taking the Running path", "owner", rec.Owner)
		return n.launch(fsm.SeqStart, fsm.Running, cfg, nil)
	case rec.Owner == nodelock.OwnerInit:
		n.o.Log.Info("resuming Init after an interrupted boot", "done", rec.Done)
		return n.launch(fsm.SeqInit, fsm.Init, cfg, nil)
	default:
		n.o.Log.Info("resuming Join after an interrupted boot", "done", rec.Done)
		ticket, err := n.loadTicket()
		if err != nil {
			n.setErr(err)
			return err
		}
		return n.launch(fsm.SeqJoin, fsm.Join, cfg, ticket)
	}
}

// launch starts a sequence on a locked node in the background: Init, Join (moving to that state first) or
// Start (the Running path, which stays in Boot until it ends).
func (n *Node) launch(seq fsm.Sequence, state fsm.State, cfg *config.MachineConfig, ticket *ticket) error {
	ctx, release, err := n.seq.Acquire(n.life, n.life, seq)
	if err != nil {
		return err
	}
	if state != fsm.Running {
		if err := n.fsm.TransitionFrom([]fsm.State{fsm.Boot}, state); err != nil {
			release()
			return err
		}
	}
	go n.run(ctx, release, seq, cfg, ticket)
	return nil
}

// run executes a locked node's sequence and moves it to Running when it succeeds.
func (n *Node) run(ctx context.Context, release func(), seq fsm.Sequence, cfg *config.MachineConfig, t *ticket) {
	defer release()
	err := n.runner(true).Run(ctx, string(seq), n.tasks(seq, cfg, t))
	if err == nil && seq != fsm.SeqStart {
		err = n.nodeLock().MarkComplete()
	}
	if err == nil {
		err = n.fsm.Transition(fsm.Running)
	}
	n.endSequence(seq, err)
	switch {
	case err == nil:
		if seq == fsm.SeqStart {
			n.startSucceeded()
		}
		n.startRunning(cfg)
		n.resumePendingReset()
	case seq == fsm.SeqStart && ctx.Err() == nil:
		n.retryStart(cfg, err)
	}
}

// runningStopWait bounds how long a power sequence waits for the Running hook to return.
const runningStopWait = 10 * time.Second

// startRunning starts the Running hook's work, owned by the node until a power sequence stops it.
func (n *Node) startRunning(cfg *config.MachineConfig) {
	if n.o.Hooks.Running == nil {
		return
	}
	ctx, cancel := context.WithCancel(n.life)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.o.Hooks.Running(ctx, cfg)
	}()
	n.mu.Lock()
	n.stopRunning = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(runningStopWait):
			n.o.Log.Warn("the Running hook did not stop in time", "waited", runningStopWait)
		}
	}
	n.mu.Unlock()
}

// stopRunningWork ends the Running hook's work, if any, before a power sequence stops the services.
func (n *Node) stopRunningWork() {
	n.mu.Lock()
	stop := n.stopRunning
	n.stopRunning = nil
	n.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// tasks lists a locked node's sequence. The identity comes first: the API switches to mutual TLS right
// after the lock, before anything slow or destructive, so a locked node never answers a bootstrap token
// again even if a later task fails. Once-only tasks are skipped when the node lock says they finished.
func (n *Node) tasks(seq fsm.Sequence, cfg *config.MachineConfig, t *ticket) []sequence.Task {
	var tasks []sequence.Task
	switch seq {
	case fsm.SeqInit:
		tasks = append(tasks,
			sequence.Task{Name: "store-identity", Once: true, Run: n.storeIdentity},
			sequence.Task{Name: "machine-certificate", Once: true, Run: n.issueCertificate},
		)
	case fsm.SeqJoin:
		tasks = append(tasks,
			sequence.Task{Name: "store-identity", Once: true, Run: n.storeIdentity},
			sequence.Task{Name: "machine-certificate", Once: true, Run: func(context.Context) error { return n.storeTicketCertificate(t) }},
		)
	}
	if seq == fsm.SeqStart {
		// A configured node's clock is set before its certificate is checked; its API answers after.
		tasks = append(tasks, n.o.Hooks.network(cfg)...)
		tasks = append(tasks, sequence.Task{Name: "machine-certificate-renewal", Run: n.renewCertificate})
	}
	tasks = append(tasks, sequence.Task{Name: "api-mutual-tls", Run: n.useMutualTLS})
	if seq != fsm.SeqStart {
		// Init and Join switch to mutual TLS first: a node that took its lock stops taking the bootstrap
		// token before anything slow.
		tasks = append(tasks, n.o.Hooks.network(cfg)...)
	}
	tasks = append(tasks, n.o.Hooks.storage(cfg, seq, n.setStateDir)...)
	// STATE moves from RAM to its disk once mounted (a no-op when it was found there at boot).
	tasks = append(tasks, sequence.Task{Name: "state-on-disk", Run: func(context.Context) error { return n.nodeLock().Move(n.StateDir()) }})
	if n.o.Hooks.Measure != nil {
		tasks = append(tasks, sequence.Task{Name: "measure-lock", Run: func(ctx context.Context) error { return n.o.Hooks.Measure(ctx, cfg, n.StateDir()) }})
	}
	return append(tasks, n.o.Hooks.workload(cfg, seq)...)
}
