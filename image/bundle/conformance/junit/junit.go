// Package junit reads the JUnit reports Ginkgo writes for e2e.test and counts them the way a person
// reading a conformance run wants: passed, failed, skipped, and the failed tests by name.
package junit

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Summary is one run's outcome.
type Summary struct {
	Passed, Failed, Skipped int
	FailedNames             []string // sorted
}

type suites struct {
	Suites []suite `xml:"testsuite"`
}

type suite struct {
	Cases []testCase `xml:"testcase"`
}

type testCase struct {
	Name    string    `xml:"name,attr"`
	Status  string    `xml:"status,attr"` // Ginkgo's: passed, failed, skipped, pending, panicked, timedout, interrupted, aborted
	Failure *struct{} `xml:"failure"`
	Error   *struct{} `xml:"error"`
	Skipped *struct{} `xml:"skipped"`
}

// suiteNodes name Ginkgo's suite-level nodes as its reports do.
var suiteNodes = []string{"[BeforeSuite]", "[AfterSuite]", "[SynchronizedBeforeSuite]", "[SynchronizedAfterSuite]",
	"[ReportBeforeSuite]", "[ReportAfterSuite]", "[DeferCleanup (Suite)]"}

// Add counts the test cases of one report. Ginkgo's own nodes ([SynchronizedBeforeSuite],
// [ReportAfterSuite] ...) count as tests only when they failed: a broken suite set-up fails the run.
func (s *Summary) Add(r io.Reader) error {
	var doc suites
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		return fmt.Errorf("read JUnit report: %w", err)
	}
	for _, st := range doc.Suites {
		for _, c := range st.Cases {
			failed := c.Failure != nil || c.Error != nil
			switch c.Status {
			case "failed", "panicked", "timedout", "interrupted", "aborted":
				failed = true
			}
			suiteNode := false
			for _, p := range suiteNodes {
				suiteNode = suiteNode || strings.HasPrefix(c.Name, p)
			}
			switch {
			case failed:
				s.Failed++
				s.FailedNames = append(s.FailedNames, c.Name)
			case suiteNode:
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				s.Skipped++
			default:
				s.Passed++
			}
		}
	}
	sort.Strings(s.FailedNames)
	return nil
}

// String is the summary line: "N passed, N failed, N skipped".
func (s Summary) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", s.Passed, s.Failed, s.Skipped)
}
