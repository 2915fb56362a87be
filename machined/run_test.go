package main

import (
	"io"
	"testing"
)

// As PID 1, machined's arguments are the kernel command line's stray words: they must not stop the node
// (an exit of PID 1 panics the kernel). In sandbox mode they are a mistake to report.
func TestParseFlagsStrayWords(t *testing.T) {
	if _, err := parseFlags([]string{"splash", "single"}, io.Discard, true); err != nil {
		t.Errorf("parseFlags(stray words) as PID 1 = %v, want nil", err)
	}
	if _, err := parseFlags([]string{"--root", "/tmp/x", "extra"}, io.Discard, false); err == nil {
		t.Error("parseFlags(extra) in sandbox mode = nil, want an error")
	}
}
