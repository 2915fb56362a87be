// Package certs reads a node's Kubernetes certificates (the PKI directory's and the client certificates
// inside its kubeconfigs) and decides when each must be renewed. It holds no keys and signs nothing: the
// renderer re-issues what Due names, and the API lists what Read finds.
package certs

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// Cert is one certificate as found on the node.
type Cert struct {
	// Name is the file it came from, relative to the Kubernetes directory: pki/apiserver.crt, admin.conf.
	Name      string
	Subject   string
	Issuer    string
	NotBefore time.Time
	NotAfter  time.Time
	CA        bool
}

// RenewAt is when the node renews a leaf certificate: once less than a third of its life remains, so a
// node that is down for a while, or a renewal that fails a few times, still has months to spare
// (kubeadm's one-year leaves renew at eight months). A CA is never renewed by the node.
func (c Cert) RenewAt() time.Time {
	return c.NotAfter.Add(-c.NotAfter.Sub(c.NotBefore) / 3)
}

// Due reports whether a leaf certificate must be renewed at now.
func (c Cert) Due(now time.Time) bool {
	return !c.CA && !now.Before(c.RenewAt())
}

// Parse reads the first certificate of a PEM file.
func Parse(name string, data []byte) (Cert, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return Cert{}, fmt.Errorf("%s: no PEM certificate", name)
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		x, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return Cert{}, fmt.Errorf("%s: %w", name, err)
		}
		return Cert{Name: name, Subject: x.Subject.String(), Issuer: x.Issuer.String(),
			NotBefore: x.NotBefore, NotAfter: x.NotAfter, CA: x.IsCA}, nil
	}
}

// ParseKubeconfig reads the client certificate of a kubeconfig's first user: embedded, or the file it
// names (the kubelet's rotated credential).
func ParseKubeconfig(name string, data []byte) (Cert, error) {
	var kc clientcmdv1.Config
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return Cert{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(kc.AuthInfos) == 0 {
		return Cert{}, fmt.Errorf("%s: no user", name)
	}
	u := kc.AuthInfos[0].AuthInfo
	switch {
	case len(u.ClientCertificateData) > 0:
		return Parse(name, u.ClientCertificateData)
	case u.ClientCertificate != "":
		pemData, err := os.ReadFile(u.ClientCertificate)
		if err != nil {
			return Cert{}, fmt.Errorf("%s: %w", name, err)
		}
		c, err := Parse(name, pemData)
		c.Name = name + " → " + u.ClientCertificate
		return c, err
	default:
		return Cert{}, fmt.Errorf("%s: %w", name, ErrNoCertificate)
	}
}

// ErrNoCertificate is a kubeconfig that authenticates otherwise (a worker's bootstrap token): Read leaves
// it out, since there is nothing in it to expire or renew.
var ErrNoCertificate = errors.New("no client certificate")

// Read finds every certificate under dir (a node's /etc/kubernetes): pki/**/*.crt and the client
// certificates of *.conf, sorted by name. A node without the directory yet has none. A file that does
// not parse is an error naming it, not a silent gap in the list.
func Read(dir string) ([]Cert, error) {
	var out []Cert
	var errs []error
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		isCert := strings.HasPrefix(rel, "pki"+string(filepath.Separator)) && strings.HasSuffix(rel, ".crt")
		isConf := filepath.Dir(rel) == "." && strings.HasSuffix(rel, ".conf")
		if d.IsDir() || (!isCert && !isConf) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		parse := Parse
		if isConf {
			parse = ParseKubeconfig
		}
		c, err := parse(rel, data)
		if errors.Is(err, ErrNoCertificate) {
			return nil
		}
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	slices.SortFunc(out, func(a, b Cert) int { return strings.Compare(a.Name, b.Name) })
	return out, errors.Join(errs...)
}

// Due returns the certificates of list that must be renewed at now.
func Due(list []Cert, now time.Time) []Cert {
	var due []Cert
	for _, c := range list {
		if c.Due(now) {
			due = append(due, c)
		}
	}
	return due
}
