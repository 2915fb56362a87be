package nodelock

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTakeIsOneWay(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := l.Record(); r != nil {
		t.Fatalf("fresh lock has record %+v", r)
	}
	if err := l.Take(OwnerInit, []byte("cfg: 1\n"), nil); err != nil {
		t.Fatal(err)
	}
	var held *HeldError
	for _, owner := range []string{OwnerJoin, OwnerInit} {
		if err := l.Take(owner, []byte("cfg: 2\n"), nil); !errors.As(err, &held) || held.Owner != OwnerInit {
			t.Errorf("second Take(%s) = %v, want HeldError naming init", owner, err)
		}
	}
	cfg, err := l.Config()
	if err != nil || string(cfg) != "cfg: 1\n" {
		t.Errorf("Config() = %q, %v; want the winner's config", cfg, err)
	}
}

func TestLockSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir, nil)
	if err := l.Take(OwnerJoin, []byte("c"), map[string][]byte{"ticket": []byte("t")}); err != nil {
		t.Fatal(err)
	}
	for _, task := range []string{"a", "b", "a"} {
		if err := l.MarkDone(task); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := l2.Record()
	if r == nil || r.Owner != OwnerJoin || !r.Complete {
		t.Fatalf("reopened record = %+v, want complete join", r)
	}
	if diff := cmp.Diff([]string{"a", "b"}, r.Done); diff != "" {
		t.Errorf("Done (-want +got):\n%s", diff)
	}
	if !l2.IsDone("a") || l2.IsDone("c") {
		t.Errorf("IsDone(a), IsDone(c) = %v, %v; want true, false", l2.IsDone("a"), l2.IsDone("c"))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ticket")); string(b) != "t" {
		t.Errorf("extra file = %q, want stored beside the lock", b)
	}
}

func TestTamperedConfigIsRefused(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir, nil)
	if err := l.Take(OwnerInit, []byte("good"), nil); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ConfigFile), []byte("evil"), 0o600)
	if _, err := l.Config(); err == nil {
		t.Fatal("Config() accepted a config that does not match the lock's hash")
	}
}

func TestCorruptLockIsAnError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, LockFile), []byte("{not json"), 0o600)
	if _, err := Open(dir, nil); err == nil {
		t.Fatal("Open() of a corrupt lock succeeded; a node must not silently forget it is locked")
	}
}

func TestMoveCarriesEverything(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	l, _ := Open(from, nil)
	l.Take(OwnerInit, []byte("c"), nil)
	os.MkdirAll(filepath.Join(from, "pki"), 0o700)
	os.WriteFile(filepath.Join(from, "pki", "machine.key"), []byte("k"), 0o600)
	if err := l.Move(to); err != nil {
		t.Fatal(err)
	}
	l.MarkDone("x")
	l2, err := Open(to, nil)
	if err != nil || l2.Record() == nil || !l2.IsDone("x") {
		t.Fatalf("lock at the new place = %+v, %v", l2.Record(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(to, "pki", "machine.key")); string(b) != "k" {
		t.Errorf("pki/machine.key not moved: %q", b)
	}
}

func TestClearReleases(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir, nil)
	l.Take(OwnerInit, []byte("c"), nil)
	if err := l.Clear(); err != nil {
		t.Fatal(err)
	}
	l2, _ := Open(dir, nil)
	if l2.Record() != nil {
		t.Fatal("lock still held after Clear")
	}
	if err := l2.Take(OwnerJoin, []byte("c"), nil); err != nil {
		t.Fatalf("Take after Clear = %v", err)
	}
}

func TestConcurrentTakeHasOneWinner(t *testing.T) {
	for i := 0; i < 200; i++ {
		l, _ := Open(t.TempDir(), nil)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, owner := range []string{OwnerInit, OwnerJoin} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[j] = l.Take(owner, []byte(owner), nil) }()
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: Take errors %v, want exactly one winner", i, errs)
		}
	}
}

// A reset under way survives a reboot with its options and how far it got; a copy handed out is the
// caller's to change.
func TestResetRecordSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir, nil)
	if err := l.Take(OwnerInit, []byte("c"), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.MarkLeft(); err != nil { // no reset under way: nothing to mark
		t.Fatal(err)
	}
	if r := l.Record(); r.Reset != nil {
		t.Fatalf("MarkLeft without a reset recorded %+v", r.Reset)
	}
	if err := l.MarkReset(ResetRecord{Wipe: []string{"state", "etcd"}, Graceful: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.MarkLeft(); err != nil {
		t.Fatal(err)
	}
	l.Record().Reset.Wipe[0] = "changed"
	again, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &ResetRecord{Wipe: []string{"state", "etcd"}, Graceful: true, Left: true}
	if diff := cmp.Diff(want, again.Record().Reset); diff != "" {
		t.Errorf("reset record after reopen (-want +got):\n%s", diff)
	}
}

// A config replacement cut short by a power loss leaves the old config in force or the new one, never a
// mix: the record naming the new config's hash is the commit point.
func TestReplaceConfigCutShort(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(dir string, l *Lock) // the state a cut leaves on disk
		want string
	}{
		{"before the record", func(dir string, _ *Lock) {
			os.WriteFile(filepath.Join(dir, ConfigNext), []byte("new"), 0o600)
		}, "old"},
		{"between the record and the rename", func(dir string, l *Lock) {
			if err := l.ReplaceConfig([]byte("new")); err != nil {
				t.Fatal(err)
			}
			// undo the rename: config.yaml old, config.next.yaml new
			os.Rename(filepath.Join(dir, ConfigFile), filepath.Join(dir, ConfigNext))
			os.WriteFile(filepath.Join(dir, ConfigFile), []byte("old"), 0o600)
		}, "new"},
		{"after the rename", func(_ string, l *Lock) {
			if err := l.ReplaceConfig([]byte("new")); err != nil {
				t.Fatal(err)
			}
		}, "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _ := Open(dir, nil)
			if err := l.Take(OwnerInit, []byte("old"), nil); err != nil {
				t.Fatal(err)
			}
			tc.cut(dir, l)
			again, err := Open(dir, nil) // the next boot
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ { // the second read sees what the first one finished
				if got, err := again.Config(); err != nil || string(got) != tc.want {
					t.Errorf("Config() = %q, %v; want %q", got, err, tc.want)
				}
			}
		})
	}
}

func TestStagedConfig(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir, nil)
	if _, ok := l.Staged(); ok {
		t.Fatal("a fresh lock has a staged config")
	}
	if err := l.Stage([]byte("next")); err == nil {
		t.Fatal("Stage on a free lock succeeded")
	}
	if err := l.Take(OwnerInit, []byte("c"), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Stage([]byte("next")); err != nil {
		t.Fatal(err)
	}
	if got, ok := l.Staged(); !ok || string(got) != "next" {
		t.Errorf("Staged() = %q, %v", got, ok)
	}
	if err := l.DropStaged(); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Staged(); ok {
		t.Error("staged config still there after DropStaged")
	}
}
