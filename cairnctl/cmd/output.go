package cmd

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-os/cairn/api/machine"
)

// printJSON writes one message as a single JSON line, so a stream is JSON Lines.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// formatEvent is one progress line: time, state, and what happened.
func formatEvent(e *machine.Event) string {
	var b strings.Builder
	b.WriteString(e.Time.AsTime().Local().Format("15:04:05.000"))
	fmt.Fprintf(&b, " %-8s ", e.State)
	switch e.Kind {
	case "transition":
		fmt.Fprintf(&b, "state %s", e.Message)
	case "task":
		fmt.Fprintf(&b, "%s: %s %s", e.Sequence, e.Task, e.Outcome)
	case "lock":
		if e.Outcome == "failed" {
			fmt.Fprintf(&b, "%s refused", e.Sequence)
		} else {
			fmt.Fprintf(&b, "node lock taken by %s", e.Outcome)
		}
		if e.Error != "" {
			fmt.Fprintf(&b, ": %s", e.Error)
		}
		return b.String()
	case "sequence":
		fmt.Fprintf(&b, "%s %s", e.Sequence, map[string]string{"done": "finished", "failed": "failed"}[e.Outcome])
	default:
		fmt.Fprintf(&b, "%s: %s", e.Kind, e.Outcome)
		if e.Sequence != "" {
			fmt.Fprintf(&b, " (%s)", e.Sequence)
		}
	}
	if e.Message != "" && e.Kind != "transition" {
		fmt.Fprintf(&b, " — %s", e.Message)
	}
	if e.Error != "" {
		fmt.Fprintf(&b, ": %s", e.Error)
	}
	return b.String()
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}
