package cluster

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestRewriteServer(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "kubeconfig.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := RewriteServer(in, "https://127.0.0.1:41234")
	if err != nil {
		t.Fatalf("RewriteServer() = %v", err)
	}
	golden := filepath.Join("testdata", "kubeconfig.out.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("RewriteServer() (-want +got):\n%s", diff)
	}
	if strings.Contains(string(got), "10.5.0.2") {
		t.Errorf("RewriteServer() left the L2 address in:\n%s", got)
	}
	if !strings.Contains(string(got), "certificate-authority-data: LS0tLS1") {
		t.Errorf("RewriteServer() lost the CA data:\n%s", got)
	}
}

func TestRewriteServerErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"- a list",
		"apiVersion: v1\nkind: Config\n",
		"clusters:\n- name: x\n  cluster: {}\n",
		"clusters: [\n",
	} {
		if _, err := RewriteServer([]byte(in), "https://127.0.0.1:1"); err == nil {
			t.Errorf("RewriteServer(%q) = nil error, want one", in)
		}
	}
}
