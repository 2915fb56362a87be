package slots

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
)

// nopMounter leaves ESPDir as it is: the test's directory plays the mounted ESP.
type nopMounter struct{}

func (nopMounter) Mount(string, string, string, uintptr, string) error { return nil }
func (nopMounter) Unmount(string, bool) error                          { return nil }

// testNode is a disk with an ESP (a directory), two payload partitions (files) and systemd-boot's variable.
type testNode struct {
	m            *Manager
	esp          osFS
	slotA, slotB string
	efivars      string
}

func newTestNode(t *testing.T, booted string, entries ...string) *testNode {
	t.Helper()
	esp := newESP(t, entries...)
	dir := t.TempDir()
	tn := &testNode{esp: esp, slotA: filepath.Join(dir, "vda2"), slotB: filepath.Join(dir, "vda3"), efivars: filepath.Join(dir, "efivars")}
	for _, p := range []string{tn.slotA, tn.slotB} {
		if err := os.WriteFile(p, make([]byte, 1<<16), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(tn.efivars, 0o755); err != nil {
		t.Fatal(err)
	}
	tn.boot(t, booted)
	disks := []inventory.Disk{{Name: "vda", Path: "/dev/vda", Partitions: []inventory.Partition{
		{Number: 1, Path: "/dev/vda1", Label: upgrade.ESPLabel},
		{Number: 2, Path: tn.slotA, Label: payload.PartitionLabel(payload.SlotA), Size: 1 << 16},
		{Number: 3, Path: tn.slotB, Label: payload.PartitionLabel(payload.SlotB), Size: 1 << 16},
	}}}
	tn.m = &Manager{Disks: func(context.Context) ([]inventory.Disk, error) { return disks, nil }, Mounter: nopMounter{},
		ESPDir: esp.root, EFIVars: tn.efivars, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Mounts: func() ([]byte, error) { return []byte(tn.slotA + " /usr/lib/cairn/payload squashfs ro 0 0\n"), nil }}
	return tn
}

// boot sets LoaderEntrySelected as systemd-boot does.
func (tn *testNode) boot(t *testing.T, id string) {
	t.Helper()
	b := []byte{6, 0, 0, 0}
	for _, c := range id {
		b = append(b, byte(c), 0)
	}
	b = append(b, 0, 0)
	if err := os.WriteFile(filepath.Join(tn.efivars, "LoaderEntrySelected-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func bundle(t *testing.T, uki, pl string) *bytes.Buffer {
	t.Helper()
	u, p := filepath.Join(t.TempDir(), "uki"), filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(u, []byte(uki), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(pl), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := upgrade.Write(&buf, "v2", "v1.34.2", u, p, nil); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func TestWrite(t *testing.T) {
	tn := newTestNode(t, "cairn-1-a.efi", "cairn-1-a.efi")
	br, err := upgrade.NewReader(bundle(t, "new kernel", "new payload"))
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	next, err := tn.m.Write(context.Background(), br, func(s string) { said = append(said, s) })
	if err != nil {
		t.Fatal(err)
	}
	if next.FileName() != "cairn-2-b+1.efi" {
		t.Errorf("Write = %s, want cairn-2-b+1.efi", next.FileName())
	}
	b, _ := os.ReadFile(tn.slotB)
	if !bytes.HasPrefix(b, []byte("new payload")) {
		t.Errorf("slot B's partition starts with %q, want the payload", b[:16])
	}
	if b, _ := os.ReadFile(tn.slotA); !bytes.Equal(b, make([]byte, 1<<16)) {
		t.Error("slot A's partition (the running one) was written")
	}
	if len(said) == 0 {
		t.Error("Write reported no progress")
	}
}

// The slot that booted, or one whose partition is mounted, is never written.
func TestWriteRefusesMountedSlot(t *testing.T) {
	tn := newTestNode(t, "cairn-2-b.efi", "cairn-1-a.efi", "cairn-2-b.efi")
	br, err := upgrade.NewReader(bundle(t, "new kernel", "new payload"))
	if err != nil {
		t.Fatal(err)
	}
	// B booted, so A is written: but A's partition is the mounted payload (a boot that mounted the
	// other slot's identical payload).
	if _, err := tn.m.Write(context.Background(), br, func(string) {}); err == nil || !strings.Contains(err.Error(), "is mounted") {
		t.Errorf("Write = %v, want a refusal naming the mounted partition", err)
	}
	if got := names(t, tn.esp); len(got) != 2 {
		t.Errorf("entries after a refused Write: %v, want both", got)
	}
}

func TestWriteCorruptPayload(t *testing.T) {
	tn := newTestNode(t, "cairn-1-a.efi", "cairn-1-a.efi")
	buf := bundle(t, "new kernel", "new payload")
	b := bytes.Replace(buf.Bytes(), []byte("new payload"), []byte("bad payload"), 1)
	br, err := upgrade.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.m.Write(context.Background(), br, func(string) {}); err == nil {
		t.Fatal("Write of a corrupted bundle succeeded")
	}
	if got := names(t, tn.esp); len(got) != 1 || got[0] != "cairn-1-a.efi" {
		t.Errorf("entries after a corrupted bundle: %v, want only the running one", got)
	}
}

type trialLog struct {
	mu        sync.Mutex
	events    []string
	rebooted  bool
	uncordons int
}

func (l *trialLog) event(outcome, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, outcome+": "+msg)
}

// errNeedsUncordon: a health check that passes only once the node is uncordoned (CoreDNS cannot be
// scheduled on a cordoned lone node).
var errNeedsUncordon = errors.New("CoreDNS: no ready replica")

func newTrial(tn *testNode, state string, healthy error, l *trialLog) *Trial {
	return &Trial{M: tn.m, Version: "v2", Log: tn.m.Log, Poll: time.Millisecond, StateDir: func() string { return state },
		Healthy: func(context.Context) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if healthy == errNeedsUncordon && l.uncordons > 0 {
				return nil
			}
			return healthy
		},
		Reboot:   func(string) { l.rebooted = true },
		Uncordon: func(context.Context) error { l.mu.Lock(); defer l.mu.Unlock(); l.uncordons++; return nil },
		Event:    l.event}
}

func TestTrial(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []string
		booted  string
		record  *Record
		healthy error
		// what follows
		wantEntries []string
		wantEvent   string
		wantReboot  bool
		uncordons   int
	}{
		{name: "a healthy trial boot is marked good and the node uncordoned",
			entries: []string{"cairn-1-a.efi", "cairn-2-b+0-1.efi"}, booted: "cairn-2-b.efi",
			record:      &Record{Kind: "upgrade", From: "v1", To: "v2", Slot: payload.SlotB, Timeout: 600},
			wantEntries: []string{"cairn-2-b.efi", "cairn-1-a.efi"}, wantEvent: "done: slot B (version v2) is Running and healthy", uncordons: 1},
		{name: "a trial boot that never becomes healthy reboots into the old slot",
			entries: []string{"cairn-1-a.efi", "cairn-2-b+0-1.efi"}, booted: "cairn-2-b.efi",
			record: &Record{Kind: "upgrade", From: "v1", To: "v2", Slot: payload.SlotB, Timeout: 1}, healthy: errors.New("etcd: connection refused"),
			wantEntries: []string{"cairn-1-a.efi", "cairn-2-b+0-1.efi"}, wantEvent: "failed: slot B (version v2) did not become Running and healthy within 1s (last: etcd: connection refused)", wantReboot: true, uncordons: 1},
		{name: "a drained node is uncordoned before its health is judged (its add-ons need it)",
			entries: []string{"cairn-1-a.efi", "cairn-2-b+0-1.efi"}, booted: "cairn-2-b.efi",
			record: &Record{Kind: "upgrade", From: "v1", To: "v2", Slot: payload.SlotB, Timeout: 600}, healthy: errNeedsUncordon,
			wantEntries: []string{"cairn-2-b.efi", "cairn-1-a.efi"}, wantEvent: "done: slot B (version v2) is Running and healthy", uncordons: 1},
		{name: "the old slot booted again after a failed trial says so",
			entries: []string{"cairn-1-a.efi", "cairn-2-b+0-1.efi"}, booted: "cairn-1-a.efi",
			record:      &Record{Kind: "upgrade", From: "v1", To: "v9", Slot: payload.SlotB, Timeout: 600},
			wantEntries: []string{"cairn-1-a.efi", "cairn-2-b+0-1.efi"}, wantEvent: "failed: the upgrade from v1 to v9 failed: slot B did not confirm its first boot", uncordons: 1},
		{name: "an ordinary boot does nothing",
			entries: []string{"cairn-1-a.efi"}, booted: "cairn-1-a.efi",
			wantEntries: []string{"cairn-1-a.efi"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTestNode(t, tc.booted, tc.entries...)
			state := t.TempDir()
			if tc.record != nil {
				if err := WriteRecord(state, *tc.record); err != nil {
					t.Fatal(err)
				}
			}
			l := &trialLog{}
			tr := newTrial(tn, state, tc.healthy, l)
			tr.Run(context.Background())
			if got := names(t, tn.esp); strings.Join(got, " ") != strings.Join(tc.wantEntries, " ") {
				t.Errorf("entries = %v, want %v", got, tc.wantEntries)
			}
			found := tc.wantEvent == ""
			for _, e := range l.events {
				found = found || strings.Contains(e, tc.wantEvent)
			}
			if !found {
				t.Errorf("events = %q, want one containing %q", l.events, tc.wantEvent)
			}
			if l.rebooted != tc.wantReboot || l.uncordons != tc.uncordons {
				t.Errorf("rebooted %v, uncordoned %d times; want %v, %d", l.rebooted, l.uncordons, tc.wantReboot, tc.uncordons)
			}
			_, err := os.Stat(filepath.Join(state, RecordFile))
			if kept := err == nil; kept != tc.wantReboot {
				t.Errorf("record kept = %v, want %v (kept only while the trial is undecided)", kept, tc.wantReboot)
			}
		})
	}
}
