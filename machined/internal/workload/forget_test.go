package workload

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLeftNodes(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	node := func(name, left string, status corev1.ConditionStatus, beat time.Time) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
		if left != "" {
			n.Annotations[LeftAnnotation] = left
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.NewTime(beat)}}
		return n
	}
	nodes := []corev1.Node{
		node("staying", "", corev1.ConditionUnknown, now.Add(-10*time.Minute)),
		node("gone", "2026-11-26T11:58:00Z", corev1.ConditionUnknown, now.Add(-3*time.Minute)),
		// Its kubelet reported once more between the mark and its stop (CI, 2026-11-27): still gone.
		node("reported-after-mark", "2026-11-26T11:55:00Z", corev1.ConditionUnknown, now.Add(-time.Minute)),
		node("just-left", "2026-11-26T11:59:50Z", corev1.ConditionUnknown, now.Add(-time.Minute)),
		node("still-stopping", "2026-11-26T11:58:00Z", corev1.ConditionTrue, now.Add(-5*time.Second)),
		node("garbled", "yesterday", corev1.ConditionUnknown, now.Add(-time.Hour)),
	}
	if diff := cmp.Diff([]string{"gone", "reported-after-mark"}, leftNodes(nodes, now)); diff != "" {
		t.Errorf("leftNodes() (-want +got):\n%s", diff)
	}
}
