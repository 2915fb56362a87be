package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-os/cairn/machined/internal/kubeapi"
	"github.com/cairn-os/cairn/machined/internal/sequence"
)

// drainTimeout bounds how long a reset waits for the node's pods to leave.
const drainTimeout = 2 * time.Minute

// LeaveTasks take the node out of the cluster in a graceful reset, once DrainTasks have moved its pods
// (not the static ones, not DaemonSets') away: mark its Node as left (see LeftAnnotation: the cluster does
// not list a NotReady node forever), and on a control plane remove its etcd member. They are only for a
// node whose cluster still answers.
func (w *Workload) LeaveTasks() []sequence.Task {
	if w.Renderer() == nil {
		return nil
	}
	tasks := []sequence.Task{{Name: "leave-node", Timeout: time.Minute, Run: w.markLeft}}
	if w.controlPlane() {
		tasks = append(tasks, sequence.Task{Name: "etcd-leave", Timeout: 2 * time.Minute, Run: w.leaveEtcd})
	}
	return tasks
}

// DrainTasks move the node's work elsewhere before it goes down for a while (an upgrade's reboot): the
// API's address to another control plane, then cordon and evict its pods.
func (w *Workload) DrainTasks() []sequence.Task {
	if w.Renderer() == nil {
		return nil
	}
	var tasks []sequence.Task
	if w.controlPlane() {
		// Another control plane takes the API's address over while this one drains.
		tasks = append(tasks, sequence.Task{Name: "vip-release", Timeout: time.Minute, Run: func(context.Context) error { w.stopVIP(); return nil }})
	}
	return append(tasks, []sequence.Task{
		{Name: "cordon", Timeout: time.Minute, Run: w.cordon},
		{Name: "drain", Timeout: drainTimeout + time.Minute, Run: w.drain},
	}...)
}

// Uncordon makes the node schedulable again (after an upgrade's drain).
func (w *Workload) Uncordon(ctx context.Context) error {
	c, err := w.nodeClient()
	if err != nil {
		return err
	}
	name, _ := w.Identity()
	return c.Patch(ctx, "/api/v1/nodes/"+name, []byte(`{"spec":{"unschedulable":false}}`))
}

func (w *Workload) cordon(ctx context.Context) error {
	c, err := w.nodeClient()
	if err != nil {
		return err
	}
	name, _ := w.Identity()
	return c.Patch(ctx, "/api/v1/nodes/"+name, []byte(`{"spec":{"unschedulable":true}}`))
}

func (w *Workload) drain(ctx context.Context) error {
	c, err := w.nodeClient()
	if err != nil {
		return err
	}
	name, _ := w.Identity()
	list := "/api/v1/pods?fieldSelector=" + url.QueryEscape("spec.nodeName="+name)
	var pods corev1.PodList
	if err := c.Get(ctx, list, &pods); err != nil {
		return err
	}
	var evicting []string
	for _, p := range pods.Items {
		if !evictable(p) {
			continue
		}
		ev := policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		body, _ := json.Marshal(ev)
		// A namespace being deleted refuses the eviction (kubectl drain waits for such a pod too): its
		// deletion takes the pod away, so the pod is waited for like an evicted one.
		err := c.Create(ctx, "/api/v1/namespaces/"+p.Namespace+"/pods/"+p.Name+"/eviction", body)
		if err != nil && !kubeapi.IsNotFound(err) && !kubeapi.IsNamespaceTerminating(err) {
			return fmt.Errorf("evict %s/%s: %w", p.Namespace, p.Name, err)
		}
		evicting = append(evicting, p.Namespace+"/"+p.Name)
	}
	if len(evicting) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	err = kubeapi.Poll(wctx, 2*time.Second, func(ctx context.Context) error {
		var left []string
		for _, id := range evicting {
			ns, n, _ := strings.Cut(id, "/")
			if err := c.Get(ctx, "/api/v1/namespaces/"+ns+"/pods/"+n, nil); err == nil {
				left = append(left, id)
			} else if !kubeapi.IsNotFound(err) {
				return err
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("pods still leaving: %s", strings.Join(left, ", "))
		}
		return nil
	})
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		// Evicted pods that are slow to stop (a busy node stops containers slowly) die with the node
		// anyway, and their controllers have replacements pending: the reset the user asked for goes on.
		w.Log.Warn("drain: the reset goes on with pods still stopping", "after", drainTimeout, "err", err)
		return nil
	}
	return err
}

// evictable: static (mirror) pods and DaemonSet pods stay, as kubectl drain leaves them; finished pods
// need no eviction.
func evictable(p corev1.Pod) bool {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return false
		}
	}
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
