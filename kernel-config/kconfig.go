// Package kconfig checks a kernel's .config against the options Cairn needs (cairn.config beside this
// file, embedded so the checker runs from anywhere).
package kconfig

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Fragment is cairn.config: the required options.
//
//go:embed cairn.config
var Fragment string

// Parse reads a kernel config: "CONFIG_X=value" lines, and "# CONFIG_X is not set" as value "n".
func Parse(r io.Reader) (map[string]string, error) {
	opts := map[string]string{}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if name, ok := strings.CutPrefix(line, "# "); ok && strings.HasSuffix(name, " is not set") {
			opts[strings.TrimSuffix(name, " is not set")] = "n"
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, "CONFIG_") {
			return nil, fmt.Errorf("line %d: %q is not CONFIG_NAME=value", n, line)
		}
		opts[k] = strings.Trim(v, `"`)
	}
	return opts, s.Err()
}

// Problem is one required option the config does not satisfy.
type Problem struct {
	Option string
	Want   string // "y", or "m" meaning y or m
	Got    string // "" when absent, "n" when not set
}

func (p Problem) String() string {
	want := "=y"
	if p.Want == "m" {
		want = "=y or =m"
	}
	switch p.Got {
	case "", "n":
		return fmt.Sprintf("missing  %s (want %s)", p.Option, want)
	default:
		return fmt.Sprintf("wrong    %s=%s (want %s)", p.Option, p.Got, want)
	}
}

// Check compares config with the required options and returns every problem, sorted by option.
// Required "y" accepts only y; required "m" accepts y or m; any other value is compared literally.
func Check(required, config map[string]string) []Problem {
	var out []Problem
	for opt, want := range required {
		got := config[opt]
		ok := got == want
		if want == "m" {
			ok = got == "y" || got == "m"
		}
		if !ok {
			out = append(out, Problem{Option: opt, Want: want, Got: got})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Option < out[j].Option })
	return out
}
