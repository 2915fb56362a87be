// Package kcmdline splits a kernel command line into its words, for every program of the image that
// reads one: machined for its own settings, and init, machined and its modprobe for the parameters the
// line gives kernel modules.
package kcmdline

import "strings"

// Words breaks the line on spaces, keeping double-quoted values whole and dropping the quotes, as the
// kernel does: `a="b c"` is the one word `a=b c`.
func Words(line string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
		case (r == ' ' || r == '\n' || r == '\t') && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
