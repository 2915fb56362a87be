package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

const (
	lockup27min = "[ 1764.198536] watchdog: BUG: soft lockup - CPU#0 stuck for 1632s! [runc:189]"
	lockup22s   = "[   32.052024] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [kube-apiserver:412]"
	kernelPanic = "[    3.101010] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100"
)

func TestKernelHang(t *testing.T) {
	tests := []struct {
		name, console, want string
	}{
		{"empty", "", ""},
		{"a healthy boot", "[    0.48] Run /init as init process\nmachine API listening\n", ""},
		// Under TCG on a busy host a CPU is reported stuck for tens of seconds and the node goes on.
		{"a short soft lockup passes", lockup22s + "\n", ""},
		{"a soft lockup of minutes", lockup22s + "\n" + lockup27min + "\n", lockup27min},
		{"at the threshold", "watchdog: BUG: soft lockup - CPU#1 stuck for 180s! [etcd:300]\n", "watchdog: BUG: soft lockup - CPU#1 stuck for 180s! [etcd:300]"},
		{"a panic", "[    3.1] Run /init as init process\n" + kernelPanic + "\n", kernelPanic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KernelHang([]byte(tt.console)); got != tt.want {
				t.Errorf("KernelHang() = %q, want %q", got, tt.want)
			}
		})
	}
}

// The watcher cancels the wait it guards with the console line, also when the line was written in two
// pieces, and looks only past the offset it starts from.
func TestWatchHang(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	old := kernelPanic + " (the boot before)\n"
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go hangWatch{Node: "e2e-cp1", Console: path, Offset: int64(len(old)), Every: time.Millisecond}.run(ctx, cancel)

	appendFile(t, path, lockup22s+"\n"+lockup27min[:30])
	select {
	case <-ctx.Done():
		t.Fatalf("the watcher ended the wait on %v before a whole hang line was written", context.Cause(ctx))
	case <-time.After(50 * time.Millisecond):
	}
	appendFile(t, path, lockup27min[30:]+"\n")
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher did not see the hang")
	}
	err := withHang(ctx, errors.New("node e2e-cp1: waiting for Running: context canceled"))
	if !errors.Is(err, ErrKernelHang) || !strings.Contains(err.Error(), "stuck for 1632s") || !strings.Contains(err.Error(), "e2e-cp1") {
		t.Errorf("withHang() = %v, want the node, ErrKernelHang and the console line", err)
	}
}

func TestWithHangKeepsOtherErrors(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupted"))
	want := errors.New("boot timeout")
	if got := withHang(ctx, want); got != want {
		t.Errorf("withHang() = %v, want %v", got, want)
	}
	if got := withHang(ctx, nil); got != nil {
		t.Errorf("withHang(nil) = %v, want nil", got)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// A kernel that never runs init ends the wait once InitWithin has passed since QEMU started, naming where
// the vCPUs are; one line from init, even before the bound, and the console's silence afterwards is
// no hang.
func TestWatchHangNoInit(t *testing.T) {
	halted := func(context.Context) ([]qemu.CPU, error) {
		return []qemu.CPU{{N: 0, Halted: true}, {N: 1, RIP: "ffffffff810705e1"}}, nil
	}
	tests := []struct {
		name, console string
		cpus          func(context.Context) ([]qemu.CPU, error)
		network       bool
		want          string // in the error; "" for no hang
	}{
		{"silent after the kernel's last line", "[    0.440218] PCI: Fatal: No config space access function found\n", halted, false,
			"no line from init on its console 1ms after QEMU started (console CONSOLE); its vCPUs: CPU#0 halted (idle, waiting for an interrupt); CPU#1 in the kernel at ffffffff810705e1; its network does not answer"},
		{"the console stopped", "", halted, true, "; its network answers: user space runs, its console stopped"},
		{"the monitor does not answer", "", func(context.Context) ([]qemu.CPU, error) { return nil, errors.New("qemu monitor: connection refused") }, false,
			"its vCPUs unknown: qemu monitor: connection refused"},
		{"init ran", "[    0.44] PCI: Fatal: No config space access function found\ncairn init: root image mounted from /dev/loop0 (2 modules loaded), starting /sbin/machined\n", halted, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "console.log")
			if err := os.WriteFile(path, []byte(tt.console), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			w := hangWatch{Node: "e2e-cp1", Console: path, Every: time.Millisecond, Started: time.Now(), InitWithin: time.Millisecond,
				CPUs: tt.cpus, Network: func(context.Context) bool { return tt.network }}
			go w.run(ctx, cancel)
			select {
			case <-ctx.Done():
				err := withHang(ctx, errors.New("waiting for the guest network: context canceled"))
				want := strings.ReplaceAll(tt.want, "CONSOLE", path)
				if tt.want == "" || !errors.Is(err, ErrKernelHang) || !strings.Contains(err.Error(), want) {
					t.Errorf("the watcher ended the wait with %v, want %q", err, want)
				}
			case <-time.After(200 * time.Millisecond):
				if tt.want != "" {
					t.Errorf("the watcher did not end the wait, want %q", tt.want)
				}
			}
		})
	}
}
