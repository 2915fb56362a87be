// Package upgrade is the contract between the image builder, cairnctl and machined about an upgrade
// bundle: the one file (`make image` writes _out/cairn-upgrade.tar) that carries everything a slot holds.
//
// It is an uncompressed tar (its two big members are compressed already) whose members come in this order,
// so a node can write each one where it goes while it arrives, without keeping the bundle anywhere, and
// write the boot entry last: the entry is what makes the slot boot, so it must not exist before the
// payload it needs is in place.
//
//	manifest.json     Manifest: the image's version, its Kubernetes version, and each member's Sum
//	manifest.sig      optional: an Ed25519 signature of manifest.json's bytes (sign.go)
//	payload.squashfs  the payload image (api/payload): the slot's payload partition
//	cairn.efi         the unified kernel image (kernel, initramfs, command line): the slot's boot entry
package upgrade

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"

	"github.com/cairn-os/cairn/api/payload"
)

// Member names, in the order they come.
const (
	ManifestName = "manifest.json"
	PayloadName  = "payload.squashfs"
	UKIName      = "cairn.efi"
)

// maxManifest bounds the manifest a reader accepts: it is a few hundred bytes.
const maxManifest = 64 << 10

// Manifest describes a bundle.
type Manifest struct {
	Version    string      `json:"version"`
	Kubernetes string      `json:"kubernetes"`
	UKI        payload.Sum `json:"uki"`
	Payload    payload.Sum `json:"payload"`
}

// Validate checks that every field is there.
func (m Manifest) Validate() error {
	switch {
	case m.Version == "":
		return errors.New("manifest: version is empty")
	case m.Kubernetes == "":
		return errors.New("manifest: kubernetes is empty")
	case m.UKI.Size <= 0 || len(m.UKI.SHA256) != 64:
		return fmt.Errorf("manifest: uki sum %q is not \"SHA256 SIZE\"", m.UKI)
	case m.Payload.Size <= 0 || len(m.Payload.SHA256) != 64:
		return fmt.Errorf("manifest: payload sum %q is not \"SHA256 SIZE\"", m.Payload)
	}
	return nil
}

// FileSum hashes a file.
func FileSum(p string) (payload.Sum, error) {
	f, err := os.Open(p)
	if err != nil {
		return payload.Sum{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return payload.Sum{}, fmt.Errorf("read %s: %w", p, err)
	}
	return payload.Sum{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// Write packs a bundle from the UKI and the payload image at those paths, signed with key unless it is nil.
// The member times are zero, so the bundle is byte-identical across builds of the same inputs.
func Write(w io.Writer, version, kubernetes, uki, payloadImage string, key ed25519.PrivateKey) (Manifest, error) {
	m := Manifest{Version: version, Kubernetes: kubernetes}
	var err error
	if m.UKI, err = FileSum(uki); err != nil {
		return m, err
	}
	if m.Payload, err = FileSum(payloadImage); err != nil {
		return m, err
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(header(ManifestName, int64(len(mj)))); err != nil {
		return m, err
	}
	if _, err := tw.Write(mj); err != nil {
		return m, err
	}
	if key != nil {
		sig := ed25519.Sign(key, mj)
		if err := tw.WriteHeader(header(SignatureName, int64(len(sig)))); err != nil {
			return m, err
		}
		if _, err := tw.Write(sig); err != nil {
			return m, err
		}
	}
	for _, f := range []struct {
		name, path string
		size       int64
	}{{PayloadName, payloadImage, m.Payload.Size}, {UKIName, uki, m.UKI.Size}} {
		if err := copyMember(tw, f.name, f.path, f.size); err != nil {
			return m, err
		}
	}
	return m, tw.Close()
}

func header(name string, size int64) *tar.Header {
	return &tar.Header{Name: name, Size: size, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
}

func copyMember(tw *tar.Writer, name, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(header(name, size)); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, f, size); err != nil {
		return fmt.Errorf("pack %s: %w", p, err)
	}
	return nil
}

// Reader reads a bundle member by member, in order.
type Reader struct {
	tr       *tar.Reader
	Manifest Manifest
	raw, sig []byte      // the manifest's bytes and their signature (nil: unsigned)
	pending  *tar.Header // the member after the manifest, read to look for a signature
}

// NewReader reads and checks the manifest.
func NewReader(r io.Reader) (*Reader, error) {
	br := &Reader{tr: tar.NewReader(r)}
	h, err := br.tr.Next()
	if err != nil {
		return nil, fmt.Errorf("not an upgrade bundle: %w", err)
	}
	if h.Name != ManifestName || h.Size > maxManifest {
		return nil, fmt.Errorf("not an upgrade bundle: its first member is %q (%d bytes), not %s", h.Name, h.Size, ManifestName)
	}
	if br.raw, err = io.ReadAll(io.LimitReader(br.tr, maxManifest)); err != nil {
		return nil, fmt.Errorf("upgrade bundle: %s: %w", ManifestName, err)
	}
	dec := json.NewDecoder(bytes.NewReader(br.raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&br.Manifest); err != nil {
		return nil, fmt.Errorf("upgrade bundle: %s: %w", ManifestName, err)
	}
	if err := br.Manifest.Validate(); err != nil {
		return nil, fmt.Errorf("upgrade bundle: %w", err)
	}
	if h, err = br.tr.Next(); err != nil {
		return nil, fmt.Errorf("upgrade bundle: after %s: %w", ManifestName, err)
	}
	if h.Name != SignatureName {
		br.pending = h
		return br, nil
	}
	if h.Size != ed25519.SignatureSize {
		return nil, fmt.Errorf("upgrade bundle: %s is %d bytes, not an Ed25519 signature", SignatureName, h.Size)
	}
	if br.sig, err = io.ReadAll(br.tr); err != nil {
		return nil, fmt.Errorf("upgrade bundle: %s: %w", SignatureName, err)
	}
	return br, nil
}

// Next returns the next member, which must be name, as a reader that fails at its end unless the member
// has want's size and SHA-256: whoever copies it learns of a bad bundle before using what it wrote.
func (br *Reader) Next(name string, want payload.Sum) (io.Reader, error) {
	h, err := br.pending, error(nil)
	if br.pending == nil {
		h, err = br.tr.Next()
	}
	br.pending = nil
	if err != nil {
		return nil, fmt.Errorf("upgrade bundle: reading %s: %w", name, err)
	}
	if h.Name != name {
		return nil, fmt.Errorf("upgrade bundle: member %q where %s should be", h.Name, name)
	}
	if h.Size != want.Size {
		return nil, fmt.Errorf("upgrade bundle: %s is %d bytes, the manifest says %d", name, h.Size, want.Size)
	}
	return &verifier{r: br.tr, h: sha256.New(), name: name, want: want}, nil
}

// verifier hashes what passes through and checks it at EOF.
type verifier struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	name string
	want payload.Sum
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want.SHA256 || v.n != v.want.Size {
			return n, fmt.Errorf("upgrade bundle: %s has SHA-256 %s and %d bytes, the manifest says %s", v.name, got, v.n, v.want)
		}
	}
	return n, err
}

// ParseVersion splits a Kubernetes version "v1.MINOR.PATCH" into its minor number.
func ParseVersion(v string) (minor int, err error) {
	f := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(f) < 2 || f[0] != "1" {
		return 0, fmt.Errorf("kubernetes version %q is not v1.MINOR.PATCH", v)
	}
	if _, err := fmt.Sscanf(f[1], "%d", &minor); err != nil {
		return 0, fmt.Errorf("kubernetes version %q is not v1.MINOR.PATCH", v)
	}
	return minor, nil
}

// CheckKubernetes refuses a change of Kubernetes version that skips a minor or goes back one: control
// planes move one minor at a time, and etcd's data is not downgraded.
func CheckKubernetes(running, next string) error {
	a, err := ParseVersion(running)
	if err != nil {
		return err
	}
	b, err := ParseVersion(next)
	if err != nil {
		return err
	}
	switch {
	case b > a+1:
		return fmt.Errorf("the image brings Kubernetes %s, which skips a minor from %s: upgrade to v1.%d first", next, running, a+1)
	case b < a:
		return fmt.Errorf("the image brings Kubernetes %s, older than the running %s: Kubernetes is never downgraded", next, running)
	}
	return nil
}
