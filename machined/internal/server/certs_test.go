package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/certs"
)

type fakeCerts struct {
	list []certs.Cert
	err  error
}

func (f fakeCerts) Certificates(context.Context) ([]certs.Cert, error) { return f.list, f.err }

// TestCertificates checks what `cairnctl certs check` is given: a leaf's renewal date, none for a CA
// (the node never renews one), and unreadable files beside the good ones.
func TestCertificates(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := certs.Cert{Name: "pki/apiserver.crt", Subject: "CN=kube-apiserver", Issuer: "CN=kubernetes",
		NotBefore: from, NotAfter: from.Add(300 * 24 * time.Hour)}
	ca := certs.Cert{Name: "pki/ca.crt", Subject: "CN=kubernetes", Issuer: "CN=kubernetes", NotBefore: from,
		NotAfter: from.AddDate(10, 0, 0), CA: true}
	broken := errors.Join(errors.New("pki/front-proxy-client.crt: no PEM certificate"), errors.New("admin.conf: no user"))
	s := &Server{Certs: fakeCerts{list: []certs.Cert{leaf, ca}, err: broken}}
	r, err := s.Certificates(context.Background(), &machine.CertificatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name    string
		RenewAt time.Time
		CA      bool
	}
	var got []row
	for _, c := range r.Certificates {
		var renew time.Time
		if c.RenewAt != nil {
			renew = c.RenewAt.AsTime()
		}
		got = append(got, row{c.Name, renew, c.Ca})
	}
	want := []row{{"pki/apiserver.crt", from.Add(200 * 24 * time.Hour), false}, {"pki/ca.crt", time.Time{}, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Certificates (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"pki/front-proxy-client.crt: no PEM certificate", "admin.conf: no user"}, r.Problems); diff != "" {
		t.Errorf("Certificates problems (-want +got):\n%s", diff)
	}
	if _, err := (&Server{}).Certificates(context.Background(), &machine.CertificatesRequest{}); code(err).String() != "Unimplemented" {
		t.Errorf("Certificates without a source = %v, want Unimplemented", err)
	}
}
