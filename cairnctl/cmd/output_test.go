package cmd

import (
	"strings"
	"testing"
)

// checkText fails t unless got holds every string of want and none of not; what names got in the failure.
func checkText(t *testing.T, what, got string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s = %q, want %q in it", what, got, w)
		}
	}
	for _, n := range not {
		if strings.Contains(got, n) {
			t.Errorf("%s = %q, want no %q in it", what, got, n)
		}
	}
}
