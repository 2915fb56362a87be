package config

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one field of a config.
type FieldError struct {
	Path    string // dotted path, e.g. cluster.network.podCIDR
	Message string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Message }

// Errors is every problem found in a config; a user sees them all at once.
type Errors []FieldError

func (e Errors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem(s) in the config:", len(e))
	for _, fe := range e {
		b.WriteString("\n  - ")
		b.WriteString(fe.Error())
	}
	return b.String()
}

// Paths lists the field paths, in order.
func (e Errors) Paths() []string {
	out := make([]string, len(e))
	for i, fe := range e {
		out[i] = fe.Path
	}
	return out
}

func (e *Errors) add(path, format string, args ...any) {
	*e = append(*e, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (e Errors) orNil() error {
	if len(e) == 0 {
		return nil
	}
	return e
}
