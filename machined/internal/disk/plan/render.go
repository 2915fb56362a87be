package plan

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// String renders the plan as a table, one line per volume, for logs and `cairnctl plan`.
func (p Plan) String() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VOLUME\tACTION\tDEVICE\tTARGET\tWHY")
	for _, s := range p.Steps {
		dev := s.Device()
		switch {
		case s.Action == Tmpfs:
			dev = "tmpfs"
		case dev == "":
			dev = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Volume, s.Action, dev, s.Target, s.Reason)
	}
	w.Flush()
	return b.String()
}
