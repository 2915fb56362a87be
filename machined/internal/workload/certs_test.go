package workload

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/paths"
)

// TestRenewCertificates boots a control plane's PKI at one date and again later: the leaves and
// kubeconfigs are re-issued only once less than a third of their life is left, and the CAs never.
func TestRenewCertificates(t *testing.T) {
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gen, err := config.Generate(config.GenOptions{ClusterName: "c", Endpoint: "https://10.0.0.1:6443", Now: issued}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := issued
	w := &Workload{
		Paths:    paths.Paths{Root: t.TempDir()},
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:      func() time.Time { return now },
		Identity: func() (string, []netip.Addr) { return "cp1", []netip.Addr{netip.MustParseAddr("10.0.0.1")} },
	}
	if err := w.render(gen.ControlPlane); err != nil {
		t.Fatal(err)
	}
	if err := w.writePKI(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := w.Renderer().Layout()
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	apiserver, admin, ca := l.PKIFile(kube.APIServerCert), l.KubernetesFile(kube.AdminConf), l.PKIFile(kube.CACert)
	first := map[string][]byte{apiserver: read(apiserver), admin: read(admin), ca: read(ca)}

	// Seven months on, two thirds of a year have not passed: nothing changes.
	now = issued.AddDate(0, 7, 0)
	if err := w.renewCertificates(context.Background()); err != nil {
		t.Fatalf("renewCertificates at %s: %v", now, err)
	}
	for path, was := range first {
		if !bytes.Equal(read(path), was) {
			t.Errorf("at %s, %s was rewritten; it has more than a third of its life left", now.Format(time.DateOnly), path)
		}
	}

	// Nine months on: the leaves and kubeconfigs are new, valid a year from now; the CA is the same.
	now = issued.AddDate(0, 9, 0)
	if err := w.renewCertificates(context.Background()); err != nil {
		t.Fatalf("renewCertificates at %s: %v", now, err)
	}
	for _, path := range []string{apiserver, admin} {
		if bytes.Equal(read(path), first[path]) {
			t.Errorf("at %s, %s was not renewed", now.Format(time.DateOnly), path)
		}
	}
	if !bytes.Equal(read(ca), first[ca]) {
		t.Errorf("renewal rewrote the CA %s", ca)
	}
	list, err := w.Certificates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if !c.CA && !c.NotAfter.Equal(now.Add(pki.LeafValidity)) {
			t.Errorf("after renewal %s expires %s, want %s", c.Name, c.NotAfter, now.Add(pki.LeafValidity))
		}
	}
	if len(list) < 10 {
		t.Errorf("Certificates listed %d, want every PKI certificate and kubeconfig", len(list))
	}
}
