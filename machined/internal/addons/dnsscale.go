package addons

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/api/config"
)

// CoreDNS's replica count follows the cluster's size when the config sets none: one pod while the
// cluster has one node, DefaultCoreDNSReplicas from its second on, as kops' DNS autoscaler does with
// preventSinglePointFailure. On one node a second pod survives no node loss; it costs its memory for
// the node's life and its start (a pod sandbox through the CNI plugins, the kube binary's start, its
// lists of the API) while the node's control plane comes up, which is when the first DNS answer waits.

// NodeCount is what the replica count follows.
type NodeCount struct {
	Schedulable int // Nodes not cordoned, Ready or not
	Ready       int // of those, the Ready ones
}

// CountNodes counts the nodes of a Node list.
func CountNodes(nodes []corev1.Node) NodeCount {
	var n NodeCount
	for _, node := range nodes {
		if node.Spec.Unschedulable {
			continue
		}
		n.Schedulable++
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n.Ready++
			}
		}
	}
	return n
}

// CoreDNSReplicas is the replica count CoreDNS should run, given the count it runs now (0 when its
// Deployment does not exist yet) and the cluster's nodes. A configured count is kept as it is.
//
// It goes up only once a second node is Ready, so that the new pod is placed there (the pods' spread is
// a preference, and a node that has just registered is not schedulable yet), and down only once the
// cluster has a single schedulable node, Ready or not: a node that reboots or is unreachable for a while
// does not take a replica away and give it back.
func CoreDNSReplicas(c config.CoreDNS, current int32, n NodeCount) int32 {
	if c.Replicas > 0 {
		return c.Replicas
	}
	switch {
	case n.Ready >= 2:
		return config.DefaultCoreDNSReplicas
	case n.Schedulable <= 1 || current < 1:
		return 1
	default:
		return min(current, config.DefaultCoreDNSReplicas)
	}
}

// coreDNSReplicas is the count rendered: the configured one, else the one the caller worked out.
func (o Options) coreDNSReplicas() int32 {
	switch {
	case o.CoreDNS.Replicas > 0:
		return o.CoreDNS.Replicas
	case o.CoreDNSReplicas > 0:
		return o.CoreDNSReplicas
	default:
		return 1
	}
}
