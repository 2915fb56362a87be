package logs

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/logring"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

func newSupervisor() *supervisor.Supervisor {
	sup := supervisor.New(nil, nil)
	sup.Register("machined", func() supervisor.Info { return supervisor.Info{Name: "machined"} })
	sup.Register("apid", func() supervisor.Info { return supervisor.Info{Name: "apid"} }) // listed, but no log
	for _, l := range []string{"one", "two", "three"} {
		sup.Logs("machined").Add(l)
	}
	return sup
}

func TestRingLogs(t *testing.T) {
	s := &Source{Rings: newSupervisor()}
	tests := []struct {
		tail int
		want []string
	}{
		{0, []string{"one", "two", "three"}},
		{2, []string{"two", "three"}},
		{10, []string{"one", "two", "three"}},
	}
	for _, tc := range tests {
		var got []string
		err := s.Logs(context.Background(), "machined", tc.tail, false, func(l logring.Record) error {
			if l.Service != "machined" || l.Time.IsZero() {
				t.Errorf("line %+v, want service machined and a time", l)
			}
			got = append(got, l.Line)
			return nil
		})
		if err != nil {
			t.Fatalf("Logs(machined, tail %d) = %v", tc.tail, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Logs(machined, tail %d) mismatch (-want +got):\n%s", tc.tail, diff)
		}
	}
}

func TestRingLogsFollow(t *testing.T) {
	sup := newSupervisor()
	ch := follow(t, &Source{Rings: sup}, "machined", 1)
	expect(t, ch, "three")
	sup.Logs("machined").Add("four")
	expect(t, ch, "four")
}

func TestSendErrorEndsTheStream(t *testing.T) {
	s := &Source{Rings: newSupervisor()}
	gone := errors.New("client gone")
	calls := 0
	err := s.Logs(context.Background(), "machined", 0, true, func(logring.Record) error { calls++; return gone })
	if !errors.Is(err, gone) || calls != 1 {
		t.Fatalf("Logs() with a failing send = %v after %d sends, want %v after 1", err, calls, gone)
	}
}

func TestUnknownServiceListsKnownOnes(t *testing.T) {
	root := t.TempDir()
	writeLog(t, root, podDir+"/kube-apiserver/0.log", cri(1, "stdout", "F", "x"))
	s := &Source{Rings: newSupervisor(), PodLogs: root}
	err := s.Logs(context.Background(), "kubelt", 0, false, func(logring.Record) error { return nil })
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("Logs(kubelt) = %v, want a NotFoundError", err)
	}
	if diff := cmp.Diff([]string{"kube-apiserver", "machined"}, nf.Known); diff != "" {
		t.Errorf("known logs mismatch (-want +got):\n%s", diff)
	}
	var marker interface{ NotFound() }
	if !errors.As(err, &marker) {
		t.Errorf("%T has no NotFound() marker for the API", err)
	}
	if got := (&NotFoundError{Service: "x"}).Error(); got != `no log named "x": this node has no logs yet` {
		t.Errorf("Error() with nothing known = %q", got)
	}
}
