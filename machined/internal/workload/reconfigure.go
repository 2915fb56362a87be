package workload

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/configapply"
	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
	"github.com/cairn-os/cairn/machined/internal/logring"
	"github.com/cairn-os/cairn/machined/internal/logs"
)

// The live half of `cairnctl apply`: a Running node takes a changed config without a reboot. Each changed
// part is rendered again and what reads it restarts, one at a time, each checked healthy before the next,
// so a change that breaks a component stops there and the caller can put the old config back the same way.

// Reconfigure makes c the workload's config and applies the changes listed (config.Changes against the
// config in force) to the running node, reporting each step. A node that runs no Kubernetes (sandbox
// mode without a payload) has nothing to reconfigure.
func (w *Workload) Reconfigure(ctx context.Context, c *config.MachineConfig, changes []config.Change, progress func(string)) error {
	if w.Renderer() == nil {
		return nil
	}
	if err := w.render(c); err != nil {
		return err
	}
	touches := func(prefixes ...string) bool { return configapply.Touches(changes, prefixes...) }
	if touches("machine.registries") {
		if err := w.writeRegistries(); err != nil {
			return fmt.Errorf("registries: %w", err)
		}
		progress("registries: containerd's hosts.toml files rewritten (containerd reads them at each pull)")
	}
	if touches("machine.kubelet") {
		progress("kubelet: config rewritten; restarting the kubelet")
		if err := w.restartKubelet(ctx); err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
		progress("kubelet: healthy and the node Ready")
	}
	if touches("machine.nodeLabels", "machine.nodeTaints") {
		if err := w.publishNodeSpec(ctx); err != nil {
			return fmt.Errorf("node labels and taints: %w", err)
		}
		progress("node labels and taints: asked for on the Node; waiting for a control plane to apply them")
		if err := w.waitNodeSpec(ctx); err != nil {
			return fmt.Errorf("node labels and taints: %w", err)
		}
		progress("node labels and taints: on the Node")
	}
	if w.controlPlane() {
		for _, comp := range []struct{ prefix, name string }{
			{"cluster.etcd", "etcd"},
			{"cluster.apiServer", "kube-apiserver"},
			{"cluster.controllerManager", "kube-controller-manager"},
			{"cluster.scheduler", "kube-scheduler"},
		} {
			if !touches(comp.prefix) {
				continue
			}
			progress(comp.name + ": static pod rewritten; waiting for the kubelet to restart it")
			if err := w.rewriteStaticPod(ctx, comp.name); err != nil {
				return fmt.Errorf("%s: %w", comp.name, err)
			}
			progress(comp.name + ": restarted and healthy")
		}
		if touches("cluster.proxy", "cluster.coreDNS") {
			if err := w.applyAddons(ctx); err != nil {
				return fmt.Errorf("add-ons: %w", err)
			}
			progress("add-ons: applied again")
		}
	}
	return nil
}

// writeRegistries writes containerd's registry hosts directory from the config: only what it says (a
// host dropped from it goes).
func (w *Workload) writeRegistries() error {
	r := w.Renderer()
	regs, err := r.RegistryFiles()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(r.Layout().RegistryHostsDir()); err != nil {
		return err
	}
	return kube.WriteFiles(regs)
}

// restartKubelet stops the kubelet (its pods go on running) and starts it on its rendered config again,
// then waits for it to be healthy and the node Ready.
func (w *Workload) restartKubelet(ctx context.Context) error {
	if err := w.Services.Stop(ctx, "kubelet"); err != nil && !isUnknown(err) {
		return err
	}
	if err := w.startKubelet(ctx); err != nil {
		return err
	}
	if err := kubeapi.Poll(ctx, 2*time.Second, kubeletHealthy); err != nil {
		return err
	}
	return w.waitNodeReady(ctx)
}

func kubeletHealthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, kube.KubeletHealthzURL(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: HTTP %d", resp.StatusCode)
	}
	return nil
}

// rewriteStaticPod writes a control-plane component's manifest again and waits until the kubelet has
// started a new container for it and the component is healthy. A component that does not come up says
// how its new container ended.
func (w *Workload) rewriteStaticPod(ctx context.Context, component string) error {
	r := w.Renderer()
	var files kube.Files
	var err error
	switch component {
	case "etcd":
		var f kube.File
		f, err = r.EtcdManifest(w.etcdOptions())
		files = kube.Files{f}
	case "kube-apiserver":
		files, err = r.APIServerManifest()
	default:
		files, err = r.ControllerManifests()
	}
	if err != nil {
		return err
	}
	since := time.Now()
	if err := kube.WriteFiles(files); err != nil {
		return err
	}
	health := w.healthOf(component)
	watch := newRestartWatch(component, since)
	// The last failure seen before the deadline says why (a check cut by the deadline only says that).
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := w.observeRestart(cctx, watch)
		if err == nil {
			err = health(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		var loop *crashLoopError
		if errors.As(err, &loop) {
			loop.Log = w.lastFailure(ctx, component)
			return loop
		}
		if ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return ctx.Err()
			}
			return fmt.Errorf("not running and healthy in time (%w); last: %v", ctx.Err(), last)
		case <-time.After(2 * time.Second):
		}
	}
}

// observeRestart lists the component's containers for the watch.
func (w *Workload) observeRestart(ctx context.Context, watch *restartWatch) error {
	cli := w.containerdClient()
	if cli == nil {
		return fmt.Errorf("containerd is not running")
	}
	nctx := namespaces.WithNamespace(ctx, containerd.NamespaceK8s)
	ctrs, err := cli.Containers(nctx, fmt.Sprintf(`labels."io.kubernetes.container.name"==%s,labels."io.kubernetes.pod.namespace"==kube-system`, watch.component))
	if err != nil {
		return err
	}
	var runs []containerRun
	for _, c := range ctrs {
		info, err := c.Info(nctx, client.WithoutRefreshedMetadata)
		if err != nil {
			continue
		}
		run := containerRun{ID: c.ID(), Created: info.CreatedAt, State: "no running process"}
		if task, err := c.Task(nctx, nil); err == nil {
			if st, err := task.Status(nctx); err == nil {
				run.Running = st.Status == client.Running
				run.State = fmt.Sprintf("%s, exit status %d", st.Status, st.ExitStatus)
			}
		}
		runs = append(runs, run)
	}
	return watch.observe(runs)
}

// lastFailure returns the line a component's newest container ended on, or the run's before it when the
// newest wrote nothing yet: what a crash loop says about itself.
func (w *Workload) lastFailure(ctx context.Context, component string) string {
	src := logs.Source{PodLogs: w.Renderer().Layout().PodLogs()}
	var lines []string
	collect := func(r logring.Record) error {
		lines = append(lines, r.Line)
		return nil
	}
	if err := src.Logs(ctx, component, failureScan, false, collect); err != nil || len(lines) == 0 {
		lines = nil
		_ = src.Previous(ctx, component, failureScan, collect)
	}
	return failureLine(lines)
}
