package etcdmember

import "testing"

func TestQuorum(t *testing.T) {
	tests := []struct {
		members []Member
		want    string
	}{
		{[]Member{{Name: "cp1", IsLeader: true}}, "healthy: 1 voting member(s) (quorum 1), leader cp1"},
		{[]Member{{Name: "cp1"}, {Name: "cp2", IsLeader: true}, {Name: "cp3"}, {IsLearner: true}},
			"healthy: 3 voting member(s) (quorum 2), leader cp2, 1 learner(s)"},
		{[]Member{{Name: "cp1"}, {Name: "cp2"}}, "healthy: 2 voting member(s) (quorum 2), no leader known"},
	}
	for _, tc := range tests {
		if got := Quorum(tc.members); got != tc.want {
			t.Errorf("Quorum(%+v) = %q, want %q", tc.members, got, tc.want)
		}
	}
}
