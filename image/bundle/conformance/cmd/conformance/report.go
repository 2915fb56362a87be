package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/cairn-os/cairn/image/bundle/conformance/junit"
	"github.com/cairn-os/cairn/image/bundle/conformance/testimages"
	imageutils "k8s.io/kubernetes/test/utils/image"
)

// errFailed says tests failed; the summary already said which.
type errFailed struct{ n int }

func (e errFailed) Error() string { return fmt.Sprintf("%d tests failed", e.n) }

func summarize(w io.Writer, reports []string) error {
	var s junit.Summary
	for _, p := range reports {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = s.Add(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	fmt.Fprintln(w, s)
	for _, n := range s.FailedNames {
		fmt.Fprintf(w, "  FAILED %s\n", n)
	}
	if s.Failed > 0 {
		return errFailed{s.Failed}
	}
	return nil
}

func listImages(w io.Writer) error {
	built := map[imageutils.ImageID]bool{}
	for _, w := range testimages.Wanted() {
		built[w.ID] = true
	}
	var lines []string
	for id, cfg := range imageutils.GetOriginalImageConfigs() {
		what := "CSI driver image: storage tests, not conformance tests"
		if why, ok := testimages.NotNeeded[id]; ok {
			what = "not built: " + why
		} else if why, ok := testimages.ProvidedByNode[id]; ok {
			what = "on every node: " + why
		} else if built[id] {
			what = "built"
		}
		lines = append(lines, fmt.Sprintf("%-70s %s", cfg.GetE2EImage(), what))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return nil
}
