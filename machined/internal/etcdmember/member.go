// Package etcdmember describes a member of the etcd cluster: etcdops lists them, the machine API reports
// them, and neither imports the other for it.
package etcdmember

import "fmt"

// Member is one member of the etcd cluster.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
	// IsLeader: the member the asking member follows leads the cluster now.
	IsLeader bool
}

// Quorum describes the voting members, the quorum they need and the leader: "healthy: 3 voting members
// (quorum 2), leader cp1, 1 learner".
func Quorum(ms []Member) string {
	voters, learners := 0, 0
	leader := "no leader known"
	for _, m := range ms {
		if m.IsLearner {
			learners++
			continue
		}
		voters++
		if m.IsLeader {
			leader = "leader " + m.Name
		}
	}
	s := fmt.Sprintf("healthy: %d voting member(s) (quorum %d), %s", voters, voters/2+1, leader)
	if learners > 0 {
		s += fmt.Sprintf(", %d learner(s)", learners)
	}
	return s
}
