package addons

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/api/config"
)

func TestCoreDNSReplicas(t *testing.T) {
	for _, c := range []struct {
		name    string
		set     int32
		current int32
		nodes   NodeCount
		want    int32
	}{
		{"Init: the Deployment is new, the node not Ready yet", 0, 0, NodeCount{Schedulable: 1}, 1},
		{"Init before the node registered", 0, 0, NodeCount{}, 1},
		{"one node, Ready", 0, 1, NodeCount{1, 1}, 1},
		{"a second node registered, not Ready yet: wait", 0, 1, NodeCount{2, 1}, 1},
		{"a second node Ready", 0, 1, NodeCount{2, 2}, 2},
		{"many nodes", 0, 2, NodeCount{7, 7}, 2},
		{"a node rebooting: keep both", 0, 2, NodeCount{2, 1}, 2},
		{"both unreachable: keep both", 0, 2, NodeCount{2, 0}, 2},
		{"down to one node", 0, 2, NodeCount{1, 1}, 1},
		{"one of two cordoned", 0, 2, NodeCount{1, 1}, 1},
		{"an old Deployment of 2 on one node", 0, 2, NodeCount{1, 0}, 1},
		{"a count scaled by hand, nodes in between", 0, 5, NodeCount{3, 1}, 2},
		{"configured: kept on one node", 3, 1, NodeCount{1, 1}, 3},
		{"configured: kept on many", 1, 2, NodeCount{5, 5}, 1},
	} {
		if got := CoreDNSReplicas(config.CoreDNS{Replicas: c.set}, c.current, c.nodes); got != c.want {
			t.Errorf("%s: CoreDNSReplicas(set %d, current %d, %+v) = %d, want %d", c.name, c.set, c.current, c.nodes, got, c.want)
		}
	}
}

func TestCountNodes(t *testing.T) {
	node := func(ready corev1.ConditionStatus, cordoned bool) corev1.Node {
		n := corev1.Node{Spec: corev1.NodeSpec{Unschedulable: cordoned}}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: ready},
			}
		}
		return n
	}
	nodes := []corev1.Node{
		node(corev1.ConditionTrue, false),
		node(corev1.ConditionFalse, false),   // just registered
		node(corev1.ConditionUnknown, false), // unreachable
		node("", false),                      // no status yet
		node(corev1.ConditionTrue, true),     // cordoned: no pod goes there
	}
	if got, want := CountNodes(nodes), (NodeCount{Schedulable: 4, Ready: 1}); got != want {
		t.Errorf("CountNodes = %+v, want %+v", got, want)
	}
}
