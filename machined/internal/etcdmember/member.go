// Package etcdmember describes a member of the etcd cluster: etcdops lists them, the machine API reports
// them, and neither imports the other for it.
package etcdmember

// Member is one member of the etcd cluster.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}
