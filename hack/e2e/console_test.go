//go:build e2e

package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// kernelReportRE matches the first line of a report the guest kernel prints about itself: a hung task,
// a soft lockup or RCU stall, a warning, an oops or a panic. Their registers and call traces follow.
var kernelReportRE = regexp.MustCompile(`INFO: task .* blocked for more than|BUG: |WARNING: |rcu: INFO:|self-detected stall|Oops: |general protection fault|Kernel panic`)

// kernelReports is the first line of each kernel report in console, at most keep of them, the last ones.
func kernelReports(console string, keep int) []string {
	var out []string
	for _, line := range strings.Split(console, "\n") {
		if kernelReportRE.MatchString(line) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	if len(out) > keep {
		out = out[len(out)-keep:]
	}
	return out
}

// logConsole logs the end of a node's console and then, last, where a CI log's excerpt shows them, the
// first lines of the kernel's own reports: a call trace in the tail is the end of a report whose first
// line, which says what the kernel saw (a task blocked for minutes, a CPU stuck), has scrolled out.
func logConsole(t *testing.T, node, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("console of %s: %v", node, err)
		return
	}
	t.Logf("console of %s ends with:\n%s", node, tailString(string(b), n))
	if r := kernelReports(string(b), 5); len(r) > 0 {
		t.Logf("console of %s: the kernel reported:\n%s", node, strings.Join(r, "\n"))
	}
}
