package volumes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/paths"
)

// The boot looks for STATE only once every disk controller's driver is loaded: a disk scanned too early
// could be missing, and a configured node would then look fresh. A fresh node needs no filesystem module.
func TestFindStateWaitsForDiskDrivers(t *testing.T) {
	root := t.TempDir()
	sysRoot := filepath.Join(root, "sys")
	var order []string
	m := &Manager{Paths: paths.Paths{Root: root}, Devices: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Scanner: inventory.Scanner{SysRoot: sysRoot, DevRoot: filepath.Join(root, "dev")},
		// The drivers "load" by making /sys/block: a scan before that fails.
		DisksReady: func(context.Context) error {
			order = append(order, "disks")
			return os.MkdirAll(filepath.Join(sysRoot, "block"), 0o755)
		},
		Filesystems: func(context.Context) error { order = append(order, "filesystems"); return nil },
	}
	var state string
	tasks := m.Hook(nil, fsm.SeqBoot, func(dir string) { state = dir })
	if len(tasks) != 1 {
		t.Fatalf("boot tasks: %d, want find-state alone", len(tasks))
	}
	if err := tasks[0].Run(context.Background()); err != nil {
		t.Fatalf("find-state: %v", err)
	}
	if state != m.Paths.RunState() {
		t.Errorf("STATE is %q, want the RAM one %q", state, m.Paths.RunState())
	}
	if strings.Join(order, ",") != "disks" {
		t.Errorf("calls %v, want the disk drivers awaited and no filesystem loaded", order)
	}
}

func TestFindStateFailsWhenDiskDriversDoNot(t *testing.T) {
	m := &Manager{Paths: paths.Paths{Root: t.TempDir()}, Devices: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		DisksReady: func(context.Context) error { return context.Canceled }}
	var state string
	err := m.Hook(nil, fsm.SeqBoot, func(dir string) { state = dir })[0].Run(context.Background())
	if !errors.Is(err, context.Canceled) || state != "" {
		t.Fatalf("find-state = %v with STATE %q; want the wait's error and no STATE chosen", err, state)
	}
}
