// Package nodelock is the node lock: a one-way compare-and-swap that decides whether this node is
// initialised (Init) or joins a cluster (Join). The first to take it wins; it is written to STATE durably
// before any destructive step and is never taken back, except by Reset. It also records which once-only
// tasks have finished, so a sequence cut short by a power loss resumes without repeating them.
package nodelock

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cairn-os/cairn/machined/internal/atomicfile"
)

// Owners of the lock.
const (
	OwnerInit = "init"
	OwnerJoin = "join"
)

// File names under the STATE directory.
const (
	LockFile   = "lock.json"
	ConfigFile = "config.yaml"
	// ConfigNext is a replacing config on its way in (see ReplaceConfig).
	ConfigNext = "config.next.yaml"
	// ConfigStaged is a config applied in staged mode: it replaces ConfigFile at the next boot.
	ConfigStaged = "config.staged.yaml"
)

// Record is what the lock file holds.
type Record struct {
	Owner        string    `json:"owner"`
	Taken        time.Time `json:"taken"`
	ConfigSHA256 string    `json:"configSHA256"`
	// Done lists the once-only tasks that finished, in order.
	Done []string `json:"done,omitempty"`
	// Complete is set when the Init or Join sequence reached Running; later boots take the Running path.
	Complete bool `json:"complete,omitempty"`
	// Reset is a reset that began and has not finished yet: wiping STATE, which ends it, erases the
	// record with the lock. The next boot finishes it (see ResetRecord).
	Reset *ResetRecord `json:"reset,omitempty"`
}

// ResetRecord is what a reset was asked to do, kept so that a power cut in the middle of it does not leave
// a node half out of its cluster: the next boot carries the reset on.
type ResetRecord struct {
	Wipe     []string  `json:"wipe"`
	Graceful bool      `json:"graceful,omitempty"`
	NoReboot bool      `json:"noReboot,omitempty"`
	Started  time.Time `json:"started"`
	// Left is set just before the node begins to leave its cluster (its Node marked left, its etcd member
	// removed). Until then a graceful reset can start over from Running; from then on the cluster no
	// longer counts the node, so the reset can only go forward, without it.
	Left bool `json:"left,omitempty"`
}

// HeldError says the lock is already taken; the API maps it to Aborted.
type HeldError struct{ Owner string }

func (e *HeldError) Error() string {
	return fmt.Sprintf("the node lock is held by %s: this node is already being configured by %s", e.Owner, e.Owner)
}

// Lock is the node lock kept in a STATE directory.
type Lock struct {
	mu  sync.Mutex
	dir string
	rec *Record
	now func() time.Time
}

// Open reads the lock from dir, if any.
func Open(dir string, now func() time.Time) (*Lock, error) {
	if now == nil {
		now = time.Now
	}
	l := &Lock{dir: dir, now: now}
	data, err := os.ReadFile(filepath.Join(dir, LockFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return l, nil
	case err != nil:
		return nil, fmt.Errorf("read node lock: %w", err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("node lock %s is corrupt: %w", filepath.Join(dir, LockFile), err)
	}
	if rec.Owner != OwnerInit && rec.Owner != OwnerJoin {
		return nil, fmt.Errorf("node lock %s names an unknown owner %q", filepath.Join(dir, LockFile), rec.Owner)
	}
	l.rec = &rec
	return l, nil
}

// Dir is where the lock lives now.
func (l *Lock) Dir() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dir
}

// Take takes the lock for owner, storing the config (and any extra files, such as a join ticket) beside it
// first. It fails with HeldError when anyone (even the same owner) holds it already.
func (l *Lock) Take(owner string, config []byte, extra map[string][]byte) error {
	if owner != OwnerInit && owner != OwnerJoin {
		return fmt.Errorf("unknown lock owner %q", owner)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec != nil {
		return &HeldError{Owner: l.rec.Owner}
	}
	rec := &Record{Owner: owner, Taken: l.now().UTC(), ConfigSHA256: ConfigSum(config)}
	if err := atomicfile.WriteFile(filepath.Join(l.dir, ConfigFile), config, 0o600); err != nil {
		return fmt.Errorf("store config: %w", err)
	}
	for name, data := range extra {
		if err := atomicfile.WriteFile(filepath.Join(l.dir, name), data, 0o600); err != nil {
			return fmt.Errorf("store %s: %w", name, err)
		}
	}
	if err := l.write(rec); err != nil {
		return err
	}
	l.rec = rec
	return nil
}

// Record returns a copy of the lock record, or nil when the lock is free.
func (l *Lock) Record() *Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return nil
	}
	return l.rec.clone()
}

func (r *Record) clone() *Record {
	c := *r
	c.Done = slices.Clone(r.Done)
	if r.Reset != nil {
		rr := *r.Reset
		rr.Wipe = slices.Clone(r.Reset.Wipe)
		c.Reset = &rr
	}
	return &c
}

// Config returns the config stored with the lock, checked against the hash in the record. A replacement
// cut short after its commit point (the record names the new config) is finished here.
func (l *Lock) Config() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return nil, errors.New("the node lock is free: no config stored")
	}
	path := filepath.Join(l.dir, ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read stored config: %w", err)
	}
	if err == nil && matches(data, l.rec.ConfigSHA256) {
		return data, nil
	}
	next := filepath.Join(l.dir, ConfigNext)
	if nd, nerr := os.ReadFile(next); nerr == nil && matches(nd, l.rec.ConfigSHA256) {
		if err := os.Rename(next, path); err != nil {
			return nil, fmt.Errorf("finish replacing the stored config: %w", err)
		}
		return nd, atomicfile.SyncDir(l.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read stored config: %w", err)
	}
	return nil, fmt.Errorf("stored config %s does not match the hash in the node lock", path)
}

func matches(data []byte, sha string) bool { return ConfigSum(data) == sha }

// ConfigSum is the hex SHA-256 of a config as the lock's record names it (and the config history).
func ConfigSum(config []byte) string {
	sum := sha256.Sum256(config)
	return hex.EncodeToString(sum[:])
}

// ReplaceConfig makes config the one stored with the lock. The new config is written beside the old one,
// then the record naming its hash (the commit point), then it is renamed over the old one: a power cut
// anywhere leaves the old config in force or the new one, never a mix (Config finishes a cut rename).
func (l *Lock) ReplaceConfig(config []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return errors.New("the node lock is free")
	}
	next := filepath.Join(l.dir, ConfigNext)
	if err := atomicfile.WriteFile(next, config, 0o600); err != nil {
		return fmt.Errorf("store the new config: %w", err)
	}
	rec := l.rec.clone()
	rec.ConfigSHA256 = ConfigSum(config)
	if err := l.write(rec); err != nil {
		return err
	}
	l.rec = rec
	if err := os.Rename(next, filepath.Join(l.dir, ConfigFile)); err != nil {
		return fmt.Errorf("replace the stored config: %w", err)
	}
	return atomicfile.SyncDir(l.dir)
}

// Stage stores config to replace the lock's at the next boot (TakeStaged).
func (l *Lock) Stage(config []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return errors.New("the node lock is free")
	}
	return atomicfile.WriteFile(filepath.Join(l.dir, ConfigStaged), config, 0o600)
}

// Staged returns the staged config, if any.
func (l *Lock) Staged() ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := os.ReadFile(filepath.Join(l.dir, ConfigStaged))
	return data, err == nil
}

// DropStaged removes the staged config (once it is in force, or refused).
func (l *Lock) DropStaged() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.Remove(filepath.Join(l.dir, ConfigStaged)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return atomicfile.SyncDir(l.dir)
}

// IsDone reports whether the once-only task finished before.
func (l *Lock) IsDone(task string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec != nil && slices.Contains(l.rec.Done, task)
}

// MarkDone records that a once-only task finished.
func (l *Lock) MarkDone(task string) error {
	return l.update(func(r *Record) {
		if !slices.Contains(r.Done, task) {
			r.Done = append(r.Done, task)
		}
	})
}

// MarkComplete records that the sequence reached Running.
func (l *Lock) MarkComplete() error { return l.update(func(r *Record) { r.Complete = true }) }

// MarkReset records that a reset began (replacing any earlier record of one).
func (l *Lock) MarkReset(rr ResetRecord) error {
	rr.Wipe = slices.Clone(rr.Wipe)
	return l.update(func(r *Record) { r.Reset = &rr })
}

// MarkLeft records that the reset under way has begun to take the node out of its cluster.
func (l *Lock) MarkLeft() error {
	return l.update(func(r *Record) {
		if r.Reset != nil {
			r.Reset.Left = true
		}
	})
}

func (l *Lock) update(f func(*Record)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return errors.New("the node lock is free")
	}
	next := l.rec.clone()
	f(next)
	if err := l.write(next); err != nil {
		return err
	}
	l.rec = next
	return nil
}

// Move copies everything in the STATE directory (the config, the lock, the identity) to a new one (tmpfs
// to disk) and uses it from then on. The lock file is written last, so a power cut during the copy leaves a
// new STATE without a lock rather than a lock without its config.
func (l *Lock) Move(dir string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if dir == l.dir {
		return nil
	}
	err := filepath.WalkDir(l.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == LockFile {
			return err
		}
		rel, err := filepath.Rel(l.dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(filepath.Join(dir, rel), data, 0o600)
	})
	if err != nil {
		return fmt.Errorf("move STATE from %s to %s: %w", l.dir, dir, err)
	}
	old := l.dir
	l.dir = dir
	if l.rec != nil {
		if err := l.write(l.rec); err != nil {
			l.dir = old
			return fmt.Errorf("move node lock: %w", err)
		}
	}
	return nil
}

// Clear releases the lock; only Reset calls it. Files that are not there are skipped without touching
// the directory: after a reset wiped and unmounted STATE, the directory is a bare (often read-only) mount
// point, and the lock is only forgotten.
func (l *Lock) Clear() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	removed := false
	for _, f := range []string{LockFile, ConfigFile, ConfigNext, ConfigStaged} {
		p := filepath.Join(l.dir, f)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("clear node lock: %w", err)
		}
		removed = true
	}
	if removed {
		if err := atomicfile.SyncDir(l.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	l.rec = nil
	return nil
}

func (l *Lock) write(rec *Record) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rec); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(l.dir, LockFile), b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("write node lock: %w", err)
	}
	return nil
}
