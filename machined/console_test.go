package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRaiseConsoleLevel(t *testing.T) {
	for _, tc := range []struct {
		name, printk string
		wantWas      int
		wantFile     string
	}{
		// A quiet boot: errors only. The warnings are let through; the other fields are the kernel's.
		{"quiet", "4\t4\t1\t7\n", 4, "5\n"},
		// loglevel=7, or no quiet: already more than warnings, left alone.
		{"verbose", "7\t4\t1\t7\n", 7, "7\t4\t1\t7\n"},
		{"at the level", "5\t4\t1\t7\n", 5, "5\t4\t1\t7\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "printk")
			if err := os.WriteFile(path, []byte(tc.printk), 0o644); err != nil {
				t.Fatal(err)
			}
			was, err := raiseConsoleLevel(path, consoleWarningLevel)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if was != tc.wantWas || string(got) != tc.wantFile {
				t.Errorf("raiseConsoleLevel(%q) = was %d, file %q; want was %d, file %q", tc.printk, was, got, tc.wantWas, tc.wantFile)
			}
		})
	}
	if _, err := raiseConsoleLevel(filepath.Join(t.TempDir(), "none"), 5); err == nil {
		t.Error("raiseConsoleLevel of a missing file: no error")
	}
	bad := filepath.Join(t.TempDir(), "printk")
	if err := os.WriteFile(bad, []byte("x 4 1 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := raiseConsoleLevel(bad, 5); err == nil {
		t.Error("raiseConsoleLevel of a level that is not a number: no error")
	}
}
