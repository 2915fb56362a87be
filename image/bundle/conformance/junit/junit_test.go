package junit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A report as Ginkgo v2 writes it for e2e.test: every spec, the filtered-out ones as skipped, and the
// suite's own nodes.
const report = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="6" disabled="4" errors="0" failures="1" time="12.5">
  <testsuite name="Kubernetes e2e suite" package="/" tests="6" disabled="0" skipped="3" errors="0" failures="1" time="12.5">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1.2"></testcase>
    <testcase name="[sig-network] DNS should provide DNS for services  [Conformance]" classname="Kubernetes e2e suite" status="passed" time="3.1"></testcase>
    <testcase name="[sig-apps] Deployment should run the lifecycle of a Deployment [Conformance]" classname="Kubernetes e2e suite" status="failed" time="5.0">
      <failure message="timed out" type="failed">timed out waiting for the condition</failure>
    </testcase>
    <testcase name="[sig-storage] CSI mock volume something" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="[sig-node] Pods should be updated [Conformance]" classname="Kubernetes e2e suite" status="timedout" time="300"></testcase>
    <testcase name="[sig-cli] Kubectl client pending one" classname="Kubernetes e2e suite" status="pending" time="0"></testcase>
    <testcase name="[ReportAfterSuite] Kubernetes e2e suite report" classname="Kubernetes e2e suite" status="passed" time="0"></testcase>
  </testsuite>
</testsuites>`

func TestSummary(t *testing.T) {
	var s Summary
	if err := s.Add(strings.NewReader(report)); err != nil {
		t.Fatal(err)
	}
	want := Summary{Passed: 1, Failed: 2, Skipped: 2, FailedNames: []string{
		"[sig-apps] Deployment should run the lifecycle of a Deployment [Conformance]",
		"[sig-node] Pods should be updated [Conformance]",
	}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	if got, want := s.String(), "1 passed, 2 failed, 2 skipped"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestSummaryFailedSuiteNode(t *testing.T) {
	var s Summary
	err := s.Add(strings.NewReader(`<testsuites><testsuite><testcase name="[SynchronizedBeforeSuite]" status="failed"><failure>no nodes</failure></testcase></testsuite></testsuites>`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Failed != 1 || s.Passed != 0 {
		t.Errorf("a failed suite set-up: got %s, want it counted as 1 failed", s)
	}
}

func TestSummaryRejectsGarbage(t *testing.T) {
	var s Summary
	if err := s.Add(strings.NewReader("not xml")); err == nil {
		t.Error("Add(not xml) = nil error, want one")
	}
}
