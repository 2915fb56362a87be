package logs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/logring"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

const podDir = "kube-system_kube-apiserver-n1_0123abcd"

// writeLog creates or appends to root/rel with the given raw lines, each ended by a newline.
func writeLog(t *testing.T, root, rel string, lines ...string) string {
	t.Helper()
	path := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func cri(sec int, stream, tag, msg string) string {
	return time.Unix(int64(sec), 0).UTC().Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + msg
}

func setMtime(t *testing.T, path string, sec int) {
	t.Helper()
	if err := os.Chtimes(path, time.Unix(int64(sec), 0), time.Unix(int64(sec), 0)); err != nil {
		t.Fatal(err)
	}
}

func TestNewestLog(t *testing.T) {
	root := t.TempDir()
	old := writeLog(t, root, podDir+"/kube-apiserver/0.log", cri(1, "stdout", "F", "x"))
	cur := writeLog(t, root, podDir+"/kube-apiserver/1.log", cri(2, "stdout", "F", "x"))
	other := writeLog(t, root, "default_kube-apiserver-fake_ffff/kube-apiserver/7.log", cri(3, "stdout", "F", "x"))
	rotated := writeLog(t, root, podDir+"/kube-apiserver/1.log.20260101-000000", cri(3, "stdout", "F", "x"))
	stale := writeLog(t, root, "kube-system_kube-apiserver-n1_old/kube-apiserver/4.log", cri(0, "stdout", "F", "x"))
	setMtime(t, old, 100)
	setMtime(t, cur, 200)
	setMtime(t, other, 300)   // another namespace
	setMtime(t, rotated, 300) // not a current log file
	setMtime(t, stale, 50)    // an older pod directory

	got, _, err := newestLog(root, "kube-system", "kube-apiserver")
	if err != nil || got != cur {
		t.Fatalf("newestLog() = %q, %v, want %q", got, err, cur)
	}
	if prev, err := previousLog(root, "kube-system", "kube-apiserver"); err != nil || prev != old {
		t.Errorf("previousLog() = %q, %v, want %q (the run before the newest)", prev, err, old)
	}
	if _, err := previousLog(root, "kube-system", "etcd"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("previousLog(etcd) error = %v, want fs.ErrNotExist", err)
	}
	if _, _, err := newestLog(root, "kube-system", "etcd"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("newestLog(etcd) error = %v, want fs.ErrNotExist", err)
	}
	if _, _, err := newestLog(filepath.Join(root, "missing"), "kube-system", "kube-apiserver"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("newestLog(missing root) error = %v, want fs.ErrNotExist", err)
	}
	// Equal times: the higher restart number is the newer container.
	setMtime(t, old, 200)
	if got, _, _ := newestLog(root, "kube-system", "kube-apiserver"); got != cur {
		t.Errorf("newestLog() with equal times = %q, want %q", got, cur)
	}
}

type lineRec struct {
	Sec  int64
	Line string
}

func collectAll(t *testing.T, root string, tail int) []lineRec {
	t.Helper()
	s := &Source{PodLogs: root}
	var got []lineRec
	err := s.Logs(context.Background(), "kube-apiserver", tail, false, func(l logring.Record) error {
		if l.Service != "kube-apiserver" {
			t.Errorf("line of service %q, want kube-apiserver", l.Service)
		}
		got = append(got, lineRec{l.Time.Unix(), l.Line})
		return nil
	})
	if err != nil {
		t.Fatalf("Logs(kube-apiserver) = %v", err)
	}
	return got
}

func TestPodLogTail(t *testing.T) {
	root := t.TempDir()
	path := writeLog(t, root, podDir+"/kube-apiserver/0.log",
		cri(1, "stdout", "F", "one"),
		cri(2, "stderr", "P", "two "),
		cri(3, "stderr", "F", "joined"),
		"garbage that is not CRI",
		cri(5, "stdout", "F", "five"),
	)
	// A line the runtime is still writing (no newline yet) is not sent.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(cri(6, "stdout", "F", "unfinished"))
	f.Close()

	all := collectAll(t, root, 0)
	wantLines := []string{"one", "two joined", "garbage that is not CRI", "five"}
	var gotLines []string
	for _, l := range all {
		gotLines = append(gotLines, l.Line)
	}
	if diff := cmp.Diff(wantLines, gotLines); diff != "" {
		t.Errorf("Logs(tail 0) mismatch (-want +got):\n%s", diff)
	}
	if all[1].Sec != 2 {
		t.Errorf("joined line time = %d, want the first part's (2)", all[1].Sec)
	}
	var last3 []string
	for _, l := range collectAll(t, root, 3) {
		last3 = append(last3, l.Line)
	}
	if diff := cmp.Diff(wantLines[1:], last3); diff != "" {
		t.Errorf("Logs(tail 3) mismatch (-want +got):\n%s", diff)
	}
	if got := collectAll(t, root, 1); len(got) != 1 || got[0].Line != "five" {
		t.Errorf("Logs(tail 1) = %v, want [five]", got)
	}
}

// follow runs a followed Logs call and hands its lines over a channel.
func follow(t *testing.T, s *Source, service string, tail int) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan string, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.Logs(ctx, service, tail, true, func(l logring.Record) error { ch <- l.Line; return nil })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("followed Logs(%s) ended with %v, want nil when the caller leaves", service, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("followed Logs(%s) did not end after its context", service)
		}
	})
	return ch
}

func expect(t *testing.T, ch <-chan string, want ...string) {
	t.Helper()
	var got []string
	deadline := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case l := <-ch:
			got = append(got, l)
		case <-deadline:
			t.Fatalf("followed lines = %q, want %q", got, want)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("followed lines mismatch (-want +got):\n%s", diff)
	}
}

func TestPodLogFollowAcrossRestartAndRotation(t *testing.T) {
	root := t.TempDir()
	dir := podDir + "/kube-apiserver/"
	first := writeLog(t, root, dir+"0.log", cri(1, "stdout", "F", "before 1"), cri(2, "stdout", "F", "before 2"))
	ch := follow(t, &Source{PodLogs: root, Poll: 5 * time.Millisecond}, "kube-apiserver", 1)
	expect(t, ch, "before 2")

	writeLog(t, root, dir+"0.log", cri(3, "stdout", "P", "appended "), cri(3, "stdout", "F", "line"))
	expect(t, ch, "appended line")

	// The container restarts: a new file for restart 1.
	setMtime(t, first, 1000)
	path := writeLog(t, root, dir+"1.log", cri(4, "stdout", "F", "after restart"))
	expect(t, ch, "after restart")

	// The kubelet rotates: the file is renamed, the runtime writes a last line to it, then reopens. The
	// older restart's file, still there, is not the log meanwhile.
	if err := os.Rename(path, path+".20260101-000000"); err != nil {
		t.Fatal(err)
	}
	writeLog(t, root, dir+"1.log.20260101-000000", cri(5, "stdout", "F", "last in the old file"))
	time.Sleep(30 * time.Millisecond) // a few polls with no current file
	writeLog(t, root, dir+"1.log", cri(6, "stdout", "F", "first in the new file"))
	expect(t, ch, "last in the old file", "first in the new file")
	writeLog(t, root, dir+"1.log", cri(7, "stdout", "F", "still there"))
	expect(t, ch, "still there")
}

func TestPodLogFollowAfterTruncation(t *testing.T) {
	root := t.TempDir()
	rel := podDir + "/kube-apiserver/0.log"
	path := writeLog(t, root, rel, cri(1, "stdout", "F", "a fairly long first line"))
	ch := follow(t, &Source{PodLogs: root, Poll: 5 * time.Millisecond}, "kube-apiserver", 0)
	expect(t, ch, "a fairly long first line")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	writeLog(t, root, rel, cri(2, "stdout", "F", "short"))
	expect(t, ch, "short")
}

func TestPodLogNamesAreChecked(t *testing.T) {
	root := t.TempDir()
	writeLog(t, root, podDir+"/kube-apiserver/0.log", cri(1, "stdout", "F", "x"))
	writeLog(t, root, "kube-system_etcd-n1_42/etcd/0.log", cri(1, "stdout", "F", "x"))
	s := &Source{PodLogs: root}
	for _, name := range []string{"../kube-system_etcd-n1_42/etcd", "kube-*", "Etcd", "kube-scheduler"} {
		err := s.Logs(context.Background(), name, 0, false, func(logring.Record) error { return nil })
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			t.Errorf("Logs(%q) = %v, want a NotFoundError", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "etcd, kube-apiserver") {
			t.Errorf("Logs(%q) error %q does not list the known logs", name, err)
		}
	}
}

// TestPreviousRun: --previous shows what a crashed container wrote before the kubelet restarted it, and
// says why for a service whose in-memory log already spans its restarts.
func TestPreviousRun(t *testing.T) {
	root := t.TempDir()
	old := writeLog(t, root, podDir+"/kube-apiserver/0.log", cri(1, "stderr", "F", "F1122 fatal: etcd timed out"))
	cur := writeLog(t, root, podDir+"/kube-apiserver/1.log", cri(2, "stdout", "F", "starting again"))
	setMtime(t, old, 100)
	setMtime(t, cur, 200)
	sup := supervisor.New(nil, nil)
	sup.Logs("kubelet").Add("kubelet line")
	s := &Source{PodLogs: root, Rings: sup}
	var got []string
	if err := s.Previous(context.Background(), "kube-apiserver", 0, func(l logring.Record) error { got = append(got, l.Line); return nil }); err != nil {
		t.Fatalf("Previous(kube-apiserver) = %v", err)
	}
	if len(got) != 1 || got[0] != "F1122 fatal: etcd timed out" {
		t.Errorf("Previous(kube-apiserver) lines = %q, want the crashed run's", got)
	}
	var nf *NotFoundError
	err := s.Previous(context.Background(), "kubelet", 0, func(logring.Record) error { return nil })
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "across its restarts") {
		t.Errorf("Previous(kubelet) = %v, want a NotFound saying its log spans its restarts", err)
	}
	if err := s.Previous(context.Background(), "etcd", 0, func(logring.Record) error { return nil }); !errors.As(err, &nf) {
		t.Errorf("Previous(etcd) without any log = %v, want NotFound", err)
	}
}
