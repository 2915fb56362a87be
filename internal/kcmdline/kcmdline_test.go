package kcmdline

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"", nil},
		{"  quiet\n", []string{"quiet"}},
		{"console=ttyS0  root=/dev/vda\tro", []string{"console=ttyS0", "root=/dev/vda", "ro"}},
		{`dyndbg="file a.c +p" quiet`, []string{"dyndbg=file a.c +p", "quiet"}},
		{`"a b"c d`, []string{"a bc", "d"}},
		{`unterminated="x y`, []string{"unterminated=x y"}},
	} {
		if got := Words(tc.line); !cmp.Equal(got, tc.want) {
			t.Errorf("Words(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}
