package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/pki"
)

// TestGenCairnconfig issues a reader's cairnconfig from a cluster's secrets: the certificate chains to the
// machine CA with the reader role, the file is private, and an existing file is kept unless --force.
func TestGenCairnconfig(t *testing.T) {
	dir := t.TempDir()
	var out, errOut strings.Builder
	if code := run([]string{"gen", "config", "--cluster-name", "demo", "--endpoint", "https://10.5.0.2:6443", "--out", dir}, &out, &errOut); code != 0 {
		t.Fatalf("gen config: %s", errOut.String())
	}
	file := filepath.Join(dir, "reader")
	args := []string{"gen", "cairnconfig", "--secrets", filepath.Join(dir, "secrets.yaml"), "--cluster-name", "demo",
		"--endpoints", "10.5.0.2,10.5.0.3", "--role", "reader", "--out", file}
	out.Reset()
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("gen cairnconfig: %s", errOut.String())
	}
	if !strings.Contains(out.String(), "role cairn:reader, certificate valid until "+time.Now().AddDate(1, 0, 0).Format("2006-01")) {
		t.Errorf("gen cairnconfig printed %q", out.String())
	}
	cc, err := client.LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := cc.Current("")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.ParseCert([]byte(ctx.Cert))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseCert([]byte(ctx.CA))
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil || len(leaf.Subject.Organization) != 1 || leaf.Subject.Organization[0] != client.RoleReader {
		t.Errorf("certificate %v (org %v), want the reader role signed by the machine CA", err, leaf.Subject.Organization)
	}
	if got := strings.Join(ctx.Endpoints, ","); got != "10.5.0.2,10.5.0.3" {
		t.Errorf("endpoints = %s", got)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode = %v, %v; want 0600", file, fi.Mode(), err)
	}
	errOut.Reset()
	if code := run(args, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "--force") {
		t.Errorf("a second gen cairnconfig over the file: exit %d, %q; want refused naming --force", code, errOut.String())
	}
}
