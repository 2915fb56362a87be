package upgrade

import (
	"bytes"
	"crypto/ed25519"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, uki, pl string) (string, string) {
	t.Helper()
	d := t.TempDir()
	u, p := filepath.Join(d, "uki"), filepath.Join(d, "payload")
	if err := os.WriteFile(u, []byte(uki), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(pl), 0o644); err != nil {
		t.Fatal(err)
	}
	return u, p
}

func TestRoundTrip(t *testing.T) {
	u, p := writeFiles(t, "kernel and initramfs", "squashfs bytes")
	var buf bytes.Buffer
	m, err := Write(&buf, "v2", "v1.34.2", u, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r.Manifest != m {
		t.Errorf("manifest = %+v, want %+v", r.Manifest, m)
	}
	for _, want := range []struct{ name, data string }{{PayloadName, "squashfs bytes"}, {UKIName, "kernel and initramfs"}} {
		sum := m.UKI
		if want.name == PayloadName {
			sum = m.Payload
		}
		mr, err := r.Next(want.name, sum)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(mr)
		if err != nil || string(got) != want.data {
			t.Errorf("%s = %q, %v; want %q", want.name, got, err, want.data)
		}
	}
}

// A member whose bytes differ from what the manifest says fails at its end, so the node never marks a
// slot it wrote from a corrupted bundle.
func TestCorruptMember(t *testing.T) {
	u, p := writeFiles(t, "kernel and initramfs", "squashfs bytes")
	var buf bytes.Buffer
	m, err := Write(&buf, "v2", "v1.34.2", u, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Replace(buf.Bytes(), []byte("squashfs bytes"), []byte("squashfs bytez"), 1)
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	mr, err := r.Next(PayloadName, m.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(mr); err == nil || !strings.Contains(err.Error(), "the manifest says") {
		t.Errorf("reading a corrupted payload: err = %v, want a SHA-256 mismatch", err)
	}
}

func TestNotABundle(t *testing.T) {
	if _, err := NewReader(strings.NewReader("hello")); err == nil || !strings.Contains(err.Error(), "not an upgrade bundle") {
		t.Errorf("NewReader(hello) err = %v, want not an upgrade bundle", err)
	}
}

func TestCheckKubernetes(t *testing.T) {
	for _, tc := range []struct {
		running, next string
		ok            bool
	}{
		{"v1.34.2", "v1.34.2", true},
		{"v1.34.2", "v1.34.5", true},
		{"v1.34.2", "v1.35.0", true},
		{"v1.34.2", "v1.36.0", false},
		{"v1.34.2", "v1.33.9", false},
		{"v1.34.2", "2.0", false},
	} {
		err := CheckKubernetes(tc.running, tc.next)
		if (err == nil) != tc.ok {
			t.Errorf("CheckKubernetes(%s, %s) = %v, want ok=%v", tc.running, tc.next, err, tc.ok)
		}
	}
}

func TestSignature(t *testing.T) {
	keyPEM, pubText, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParsePrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubText)
	if err != nil {
		t.Fatal(err)
	}
	_, otherText, _ := GenerateKey()
	other, _ := ParsePublicKey(otherText)
	u, p := writeFiles(t, "kernel and initramfs", "squashfs bytes")
	read := func(key ed25519.PrivateKey, change func([]byte) []byte) *Reader {
		t.Helper()
		var buf bytes.Buffer
		m, err := Write(&buf, "v2", "v1.34.2", u, p, key)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(change(buf.Bytes())))
		if err != nil {
			t.Fatal(err)
		}
		// The members after the signature read as in an unsigned bundle.
		if _, err := r.Next(PayloadName, m.Payload); err != nil {
			t.Fatal(err)
		}
		return r
	}
	same := func(b []byte) []byte { return b }
	if err := read(key, same).Verify(pub); err != nil {
		t.Errorf("Verify(signed, right key) = %v", err)
	}
	if err := read(key, same).Verify(other); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("Verify(signed, another key) = %v, want a mismatch", err)
	}
	if err := read(nil, same).Verify(pub); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("Verify(unsigned) = %v, want not signed", err)
	}
	// A manifest changed after signing (its version) fails, though it still parses.
	changed := func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"version": "v2"`), []byte(`"version": "v3"`), 1)
	}
	if err := read(key, changed).Verify(pub); err == nil {
		t.Error("Verify(changed manifest) = nil, want a mismatch")
	}
	if _, err := ParsePublicKey("c2hvcnQ="); err == nil {
		t.Error("ParsePublicKey(short) = nil")
	}
}
