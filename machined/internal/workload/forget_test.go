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
	node := func(name, left string, beat time.Time) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
		if left != "" {
			n.Annotations[LeftAnnotation] = left
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, LastHeartbeatTime: metav1.NewTime(beat)}}
		return n
	}
	nodes := []corev1.Node{
		node("staying", "", now.Add(-10*time.Second)),
		node("gone", "2026-11-26T11:58:00Z", now.Add(-3*time.Minute)),
		node("just-left", "2026-11-26T11:59:50Z", now.Add(-time.Minute)),
		node("came-back", "2026-11-26T11:50:00Z", now.Add(-5*time.Second)),
		node("garbled", "yesterday", now.Add(-time.Hour)),
	}
	if diff := cmp.Diff([]string{"gone"}, leftNodes(nodes, now)); diff != "" {
		t.Errorf("leftNodes() (-want +got):\n%s", diff)
	}
}
