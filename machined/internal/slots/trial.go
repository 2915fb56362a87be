package slots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/machined/internal/atomicfile"
)

// RecordFile is the name, in STATE's directory, of what an upgrade or a rollback leaves for the boot
// after it: the node was drained for it, and the boot after it says how it went.
const RecordFile = "upgrade.json"

// DefaultTrial is how long a new slot's first boot has to reach Running and pass its health checks.
const DefaultTrial = 10 * time.Minute

// Record is RecordFile's content.
type Record struct {
	Kind    string    `json:"kind"` // upgrade or rollback
	From    string    `json:"from"` // the version that wrote it
	To      string    `json:"to"`   // the version it installed ("" for a rollback)
	Slot    string    `json:"slot"` // the slot that boots next
	Gen     int       `json:"gen"`
	Staged  bool      `json:"staged,omitempty"` // written for the next reboot, without one
	Timeout int       `json:"timeoutSeconds"`
	Time    time.Time `json:"time"`
}

// WriteRecord writes the record into dir (STATE).
func WriteRecord(dir string, r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(dir+"/"+RecordFile, b, 0o600)
}

func readRecord(dir string) (*Record, error) {
	b, err := os.ReadFile(dir + "/" + RecordFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", RecordFile, err)
	}
	return &r, nil
}

// Trial follows a boot after an upgrade or a rollback: a slot booted on trial is marked good once the node
// is Running and healthy, or the node reboots (into the other slot) when that does not happen within the
// record's timeout; a boot that fell back says why; a node drained for the change is put back in service.
type Trial struct {
	M *Manager
	// Healthy is nil once the node is Running and its health checks pass.
	Healthy func(ctx context.Context) error
	// Reboot reboots the node (gracefully); reason is in an event already.
	Reboot func(reason string)
	// Uncordon makes the node schedulable again after the drain before the change.
	Uncordon func(ctx context.Context) error
	// StateDir is where STATE is ("" until it is mounted).
	StateDir func() string
	Event    func(outcome, message string)
	Version  string // machined's own
	Log      *slog.Logger
	Poll     time.Duration // 5 s when zero
}

// Run follows this boot until its trial ends or ctx does.
func (t *Trial) Run(ctx context.Context) {
	booted, err := t.M.Booted()
	if err != nil {
		t.Log.Debug("no boot slots", "error", err)
		return
	}
	var cur upgrade.Entry
	if err := t.M.withESP(ctx, false, func(esp osFS) error {
		cur, err = find(esp, booted.Slot)
		return err
	}); err != nil {
		t.Log.Warn("boot slots: cannot read the ESP", "error", err)
		return
	}
	poll := t.Poll
	if poll == 0 {
		poll = 5 * time.Second
	}
	start := time.Now()
	var rec *Record
	var lastErr error
	uncordoned := false
	for ; ; time.Sleep(poll) {
		if ctx.Err() != nil {
			return
		}
		if rec == nil {
			if dir := t.StateDir(); dir != "" {
				if rec, err = readRecord(dir); err != nil {
					t.Log.Warn("boot slots: the upgrade record is unreadable", "error", err)
				}
				if rec == nil && !cur.Counted {
					return // an ordinary boot
				}
				if rec == nil {
					rec = &Record{Kind: "upgrade", Slot: booted.Slot, Timeout: int(DefaultTrial / time.Second)}
				}
				t.announce(booted, cur, rec)
			}
		}
		if !uncordoned {
			// The drain before the reboot cordoned the node, and its pods (the add-ons the health check asks
			// about among them) come back only once it takes work again: uncordon as soon as the API answers,
			// before health is judged. A slot that fails its trial reboots either way.
			uncordoned = t.Uncordon(ctx) == nil
		}
		lastErr = t.Healthy(ctx)
		if lastErr == nil {
			break
		}
		timeout := DefaultTrial
		if rec != nil && rec.Timeout > 0 {
			timeout = time.Duration(rec.Timeout) * time.Second
		}
		if cur.Counted && time.Since(start) > timeout {
			msg := fmt.Sprintf("slot %s (version %s) did not become Running and healthy within %v (last: %v): rebooting into slot %s",
				booted.Slot, t.Version, timeout, lastErr, upgrade.Other(booted.Slot))
			t.Event("failed", msg)
			t.Reboot(msg)
			return
		}
	}
	if cur.Counted {
		if _, err := t.M.Confirm(ctx); err != nil {
			t.Event("failed", fmt.Sprintf("slot %s is healthy but could not be marked good: %v", booted.Slot, err))
			return
		}
		t.Event("done", fmt.Sprintf("slot %s (version %s) is Running and healthy: marked good", booted.Slot, t.Version))
	}
	if !uncordoned {
		if err := t.Uncordon(ctx); err != nil {
			t.Log.Warn("boot slots: uncordon after the upgrade", "error", err)
		}
	}
	if dir := t.StateDir(); dir != "" {
		if err := os.Remove(dir + "/" + RecordFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Log.Warn("boot slots: remove the upgrade record", "error", err)
		}
	}
}

// announce says what this boot is to the change that preceded it.
func (t *Trial) announce(booted, cur upgrade.Entry, rec *Record) {
	switch {
	case cur.Counted:
		t.Event("started", fmt.Sprintf("slot %s (version %s) booted on trial: it is marked good once Running and healthy, within %ds", booted.Slot, t.Version, rec.Timeout))
	case rec.Kind == "upgrade" && rec.Slot != booted.Slot:
		t.Event("failed", fmt.Sprintf("the upgrade from %s to %s failed: slot %s did not confirm its first boot, so slot %s (version %s) booted again", rec.From, rec.To, rec.Slot, booted.Slot, t.Version))
	case rec.Kind == "rollback":
		t.Event("done", fmt.Sprintf("rolled back from %s: slot %s (version %s) booted", rec.From, booted.Slot, t.Version))
	}
}
