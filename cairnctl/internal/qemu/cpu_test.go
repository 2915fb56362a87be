package qemu

import (
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		err        bool
	}{
		{"qemu", "3496 (qemu-system-x86) S 1 3496 3496 0 -1 4194560 1 0 0 0 12345 678 0 0 20 0 9 0 100 1 1",
			(12345 + 678) * 10 * time.Millisecond, false},
		{"a name with spaces and a parenthesis", "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 250 50 0 0 20 0 1 0 1 1 1",
			3 * time.Second, false},
		{"cut short", "7 (x) S 1 7 7 0 -1 0 0 0 0 0 250", 0, true},
		{"no name", "7 x S", 0, true},
		{"not a number", "7 (x) S 1 7 7 0 -1 0 0 0 0 0 2x0 50 0", 0, true},
	} {
		got, err := parseStatCPU([]byte(tc.stat))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: parseStatCPU = %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}
