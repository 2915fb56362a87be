package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	fp1 = "f46e0b5f0f45d0b9668f0f39b424f28ac3621da054460477e832578a16c7db31"
	fp2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func TestFingerprint(t *testing.T) {
	banner := func(fp string) string {
		return "====\n Cairn dev  node cairn-835be9  state Boot\n fingerprint: " + fp + "\n cairnctl --nodes 10.0.2.15 --token TOKEN --fingerprint " + fp + " status\n====\n"
	}
	logLine := func(fp string) string {
		return `time=2026-11-22T16:20:37.570Z level=INFO msg="machine API listening" address=[::]:50000 fingerprint=` + fp + " sandbox=false\n"
	}
	tests := []struct {
		name, console, want string
	}{
		{"empty", "", ""},
		{"kernel only", "[    0.48] PCI: Fatal: No config space access function found\n", ""},
		{"log line", logLine(fp1), fp1},
		{"banner", banner(fp1), fp1},
		{"both", logLine(fp1) + banner(fp1), fp1},
		{"after a reboot the newest wins", logLine(fp1) + banner(fp1) + "reboot: Restarting system\n" + logLine(fp2) + banner(fp2), fp2},
		{"truncated hex is not a fingerprint", " fingerprint: " + fp1[:40] + "\n", ""},
		{"uppercase is not machined's", " fingerprint: " + strings.ToUpper(fp1) + "\n", ""},
	}
	for _, tt := range tests {
		if got := Fingerprint([]byte(tt.console)); got != tt.want {
			t.Errorf("Fingerprint(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestConsoleFingerprintOffset(t *testing.T) {
	p := filepath.Join(t.TempDir(), "console.log")
	first := "fingerprint=" + fp1 + "\n"
	if err := os.WriteFile(p, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := ConsoleFingerprint(p, 0); got != fp1 {
		t.Errorf("ConsoleFingerprint(offset 0) = %q, want %q", got, fp1)
	}
	// Past the first boot's output there is nothing yet: a reboot's caller must keep waiting.
	if got, _ := ConsoleFingerprint(p, int64(len(first))); got != "" {
		t.Errorf("ConsoleFingerprint(past the first boot) = %q, want none", got)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(" fingerprint: " + fp2 + "\n")
		f.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := WaitFingerprint(ctx, p, int64(len(first)))
	if err != nil || got != fp2 {
		t.Errorf("WaitFingerprint() = %q, %v; want %q", got, err, fp2)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := WaitFingerprint(ctx, filepath.Join(t.TempDir(), "none"), 0); err == nil {
		t.Errorf("WaitFingerprint(missing console) = nil error, want a timeout")
	}
}
