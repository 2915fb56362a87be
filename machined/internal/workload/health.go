package workload

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/machined/internal/etcdmember"
	"github.com/cairn-os/cairn/machined/internal/health"
)

// ErrNotRunning is returned before the node's Kubernetes has been set up; the API answers it with
// FailedPrecondition.
var ErrNotRunning error = notRunning{}

type notRunning struct{}

func (notRunning) Error() string {
	return "Kubernetes is not set up on this node yet: Init or Join it, and wait until it is Running"
}
func (notRunning) Precondition() {}

// controlPlanePods are the static pods every control-plane node runs.
var controlPlanePods = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// Health checks etcd, the API server, the control-plane pods, the node's readiness and the add-ons, all
// at once (health.Run).
func (w *Workload) Health(ctx context.Context) []health.Check {
	if w.Renderer() == nil {
		return []health.Check{{Name: "kubernetes", Err: ErrNotRunning}}
	}
	name, _ := w.Identity()
	node := health.Probe{Name: "node", Run: func(ctx context.Context) (string, error) { return name + " Ready", w.NodeReady(ctx) }}
	if !w.controlPlane() {
		return health.Run(ctx, append([]health.Probe{node}, w.addonProbes()...))
	}
	probes := []health.Probe{
		{Name: "etcd", Run: func(ctx context.Context) (string, error) {
			err := w.EtcdHealthy(ctx)
			return w.etcdQuorum(ctx, err), err
		}},
		{Name: "apiserver", Run: func(ctx context.Context) (string, error) { return "ready", w.APIServerReady(ctx) }},
		{Name: "control-plane-pods", Run: w.controlPlanePodsRunning},
		node,
	}
	return health.Run(ctx, append(probes, w.addonProbes()...))
}

// etcdQuorum says how many members vote, how many make a quorum, and which one leads, as this node's
// member sees it: what an operator needs before taking a control plane down.
func (w *Workload) etcdQuorum(ctx context.Context, healthErr error) string {
	if healthErr != nil {
		return ""
	}
	ms, err := w.etcdOps().Members(ctx)
	if err != nil {
		return "healthy"
	}
	return etcdmember.Quorum(ms)
}

func (w *Workload) controlPlanePodsRunning(ctx context.Context) (string, error) {
	c, err := w.admin()
	if err != nil {
		return "", err
	}
	name, _ := w.Identity()
	var pods corev1.PodList
	if err := c.Get(ctx, "/api/v1/namespaces/kube-system/pods?fieldSelector=spec.nodeName%3D"+name, &pods); err != nil {
		return "", err
	}
	var missing []string
	for _, comp := range controlPlanePods {
		if !podReady(pods.Items, comp+"-"+name) {
			missing = append(missing, comp)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("not running and ready: %s", strings.Join(missing, ", "))
	}
	return strings.Join(controlPlanePods, ", ") + " running", nil
}

func podReady(pods []corev1.Pod, name string) bool {
	for _, p := range pods {
		if p.Name != name || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// AdminKubeconfig is a kubeconfig for the cluster endpoint with a fresh admin certificate.
func (w *Workload) AdminKubeconfig() ([]byte, error) {
	r := w.Renderer()
	if r == nil || !w.controlPlane() {
		return nil, ErrNotRunning
	}
	return r.AdminKubeconfig(w.Now())
}
