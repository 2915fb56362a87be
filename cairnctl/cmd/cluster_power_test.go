package cmd

import (
	"testing"
	"time"
)

func TestParseOffset(t *testing.T) {
	for in, want := range map[string]time.Duration{"300d": 300 * 24 * time.Hour, "2h30m": 150 * time.Minute, "0d": 0} {
		if got, err := parseOffset("--clock-offset", in); err != nil || got != want {
			t.Errorf("parseOffset(%q) = %v, %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"xd", "300", "1y"} {
		if _, err := parseOffset("--clock-offset", bad); err == nil {
			t.Errorf("parseOffset(%q) = nil error, want one", bad)
		}
	}
}
