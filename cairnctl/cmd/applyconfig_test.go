package cmd

import (
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/config"
)

func TestPrintPlan(t *testing.T) {
	gen, err := config.Generate(config.GenOptions{ClusterName: "demo", Endpoint: "https://10.5.0.2:6443"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := gen.ControlPlane
	next, err := config.Redact(cur) // a copy; its secrets differ from cur's only as REDACTED
	if err != nil {
		t.Fatal(err)
	}
	next.Cluster.Secrets = cur.Cluster.Secrets
	next.Machine.Kubelet.ExtraArgs = map[string]string{"v": "4"}
	next.Cluster.ID = "0123456789abcdef"
	var b strings.Builder
	if err := printPlan(&b, cur, next, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"--- running\n+++ new\n",
		"+    extraArgs:\n+      v: \"4\"\n",
		"-  id: " + cur.Cluster.ID + "\n+  id: 0123456789abcdef\n",
		"cluster.id                   immutable",
		"machine.kubelet.extraArgs.v  live",
		"1 live, 0 at the next reboot, 1 refused (fixed at Init or Join)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("printPlan() lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, strings.Split(cur.Cluster.Secrets.EtcdCA.Key, "\n")[1]) {
		t.Errorf("printPlan() shows a private key:\n%s", out)
	}
	b.Reset()
	if err := printPlan(&b, cur, cur, false); err != nil || b.String() != "no change: the node runs this config\n" {
		t.Errorf("printPlan() of the same config = %q, %v", b.String(), err)
	}
}
