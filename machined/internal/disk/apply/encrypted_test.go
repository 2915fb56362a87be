package apply

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/internal/fakedev"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
)

const mapperDev = "253:0"

// fakeCrypt plays disk/crypt: Format writes a LUKS2 header with the label onto the partition (and the
// token, unless noToken), Open hands out the opened volume, an in-memory device of its own.
type fakeCrypt struct {
	env     *env
	mapped  string
	inner   *fakedev.Device
	calls   []string
	token   bool
	made    bool
	refuse  error // Open's error (a TPM that will not give the key)
	noToken bool  // Format is cut short before the token
}

func (c *fakeCrypt) Format(_ context.Context, dev, label, recovery string) error {
	c.calls = append(c.calls, "format "+label+" recovery="+recovery)
	hdr := make([]byte, 208)
	copy(hdr, "LUKS\xba\xbe\x00\x02")
	copy(hdr[24:], label)
	copy(hdr[168:], "0b5c1d2e-0000-4000-8000-00000000000f")
	if _, err := c.env.dev.WriteAt(hdr, c.env.partStart()); err != nil {
		return err
	}
	// A new key: what was inside decrypts to noise, which no signature matches.
	c.inner = fakedev.New(64 << 20)
	if _, err := c.inner.WriteAt([]byte("\x8f\x13 noise"), 0); err != nil {
		return err
	}
	c.token, c.made = !c.noToken, false
	return nil
}

func (c *fakeCrypt) Open(_ context.Context, dev, name string) (string, error) {
	c.calls = append(c.calls, "open "+name)
	if c.refuse != nil {
		return "", c.refuse
	}
	return c.mapped, nil
}

func (c *fakeCrypt) Inspect(context.Context, string) (bool, bool, error) { return c.token, c.made, nil }
func (c *fakeCrypt) Close(context.Context, string) error                 { return nil }
func (c *fakeCrypt) Formatted(context.Context, string) error {
	c.calls = append(c.calls, "formatted")
	c.made = true
	return nil
}

type section struct{ *io.SectionReader }

func (section) Close() error { return nil }

func (e *env) withCrypt() *fakeCrypt {
	c := &fakeCrypt{env: e, mapped: filepath.Join(e.devRoot, "mapper", "cairn-state"), inner: fakedev.New(64 << 20)}
	e.crypt = c
	e.applier.Crypt, e.applier.RecoveryKey = c, "RECOVERY"
	e.applier.ReadDevice = func(path string) (ReadSeekCloser, error) {
		if path != c.mapped {
			return nil, errors.New("not the opened volume: " + path)
		}
		return section{io.NewSectionReader(c.inner, 0, c.inner.Size())}, nil
	}
	e.applier.DevNumber = func(string) (string, error) { return mapperDev, nil }
	return c
}

// An encrypted STATE: the blank disk is partitioned, encrypted with the recovery key, opened, and the
// filesystem is made and mounted inside; applied again it is opened and kept, never formatted again.
func TestApplyEncrypted(t *testing.T) {
	e := newEnv(t)
	c := e.withCrypt()
	step := e.plan(config.DiskSpec{Encryption: config.EncryptionTPM})
	if step.Action != plan.Format || !step.Encrypt {
		t.Fatalf("plan = %s encrypt=%v (%s), want an encrypted format", step.Action, step.Encrypt, step.Reason)
	}
	r, err := e.applier.Apply(context.Background(), step)
	if err != nil {
		t.Fatalf("Apply = %v", err)
	}
	if !r.Encrypted || r.Device != c.mapped {
		t.Errorf("Apply = device %s encrypted=%v, want the opened volume %s", r.Device, r.Encrypted, c.mapped)
	}
	if want := []string{"format CAIRN_STATE recovery=RECOVERY", "open cairn-state", "formatted"}; !slices.Equal(c.calls, want) {
		t.Errorf("crypt calls = %q, want %q", c.calls, want)
	}
	if got := strings.Join(e.mounter.mounts, "\n"); !strings.HasPrefix(got, c.mapped+" /system/state xfs") {
		t.Errorf("mounts = %q, want the opened volume at /system/state", got)
	}
	if !slices.ContainsFunc(e.runner.calls, func(s string) bool { return strings.HasPrefix(s, "mkfs.xfs") && strings.HasSuffix(s, c.mapped) }) {
		t.Errorf("runner calls = %q, want mkfs.xfs of the opened volume", e.runner.calls)
	}

	// The next boot: the plan keeps the LUKS2 volume, apply opens it and mounts what it holds.
	e.mounter.mounts = nil
	writeFile(t, e.mi, "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n")
	c.calls = nil
	next := e.plan(config.DiskSpec{}) // the disk, not the config, says it is encrypted
	if next.Action != plan.Keep || !next.Encrypt {
		t.Fatalf("plan of the encrypted STATE = %s encrypt=%v (%s), want keep, encrypted", next.Action, next.Encrypt, next.Reason)
	}
	calls := len(e.runner.calls)
	if _, err := e.applier.Apply(context.Background(), next); err != nil {
		t.Fatalf("Apply(keep) = %v", err)
	}
	if want := []string{"open cairn-state"}; !slices.Equal(c.calls, want) {
		t.Errorf("crypt calls on keep = %q, want %q", c.calls, want)
	}
	for _, call := range e.runner.calls[calls:] {
		if strings.HasPrefix(call, "mkfs") {
			t.Errorf("keep formatted: %s", call)
		}
	}
	if len(e.mounter.mounts) != 1 {
		t.Errorf("mounts on keep = %q, want one", e.mounter.mounts)
	}
}

// A TPM that will not give the key back stops the mount with its error, and nothing is formatted.
func TestApplyEncryptedRefused(t *testing.T) {
	e := newEnv(t)
	c := e.withCrypt()
	if _, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{Encryption: config.EncryptionTPM})); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.mi, "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n")
	c.refuse, c.calls = errors.New("the TPM refuses"), nil
	calls := len(e.runner.calls)
	_, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{}))
	if err == nil || !strings.Contains(err.Error(), "the TPM refuses") || !strings.Contains(err.Error(), "machine.disks.state") {
		t.Errorf("Apply with a refusing TPM = %v, want its error with the field", err)
	}
	if len(e.runner.calls) != calls || slices.Contains(c.calls, "format") {
		t.Errorf("a refused open ran %q and crypt %q", e.runner.calls[calls:], c.calls)
	}
}

// A format cut short before the sealed key was stored is made again: nothing was ever written inside.
func TestApplyEncryptedWithoutToken(t *testing.T) {
	e := newEnv(t)
	c := e.withCrypt()
	c.noToken = true
	if _, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{Encryption: config.EncryptionTPM})); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.mi, "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n")
	c.noToken, c.calls = false, nil
	if _, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{Encryption: config.EncryptionTPM})); err != nil {
		t.Fatal(err)
	}
	if want := []string{"format CAIRN_STATE recovery=RECOVERY", "open cairn-state", "formatted"}; !slices.Equal(c.calls, want) {
		t.Errorf("crypt calls = %q, want %q", c.calls, want)
	}
}

// Without a Crypter (sandbox mode) an encrypted volume is refused by name.
func TestApplyEncryptedNoCrypter(t *testing.T) {
	e := newEnv(t)
	step := e.plan(config.DiskSpec{})
	step.Encrypt = true
	_, err := e.applier.Apply(context.Background(), step)
	if err == nil || !strings.Contains(err.Error(), "encrypted") {
		t.Errorf("Apply without a Crypter = %v, want a refusal naming the encryption", err)
	}
}

// A format cut short between the sealed key and the filesystem: the volume opens, the header says no
// filesystem is made, so it is made now, over the noise inside, and recorded.
func TestApplyEncryptedBeforeMkfs(t *testing.T) {
	e := newEnv(t)
	c := e.withCrypt()
	e.runner.exit["mkfs.xfs"] = []int{1}
	if _, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{Encryption: config.EncryptionTPM})); err == nil {
		t.Fatal("Apply with a failing mkfs = nil error")
	}
	c.calls = nil
	if _, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{Encryption: config.EncryptionTPM})); err != nil {
		t.Fatalf("Apply(resume) = %v", err)
	}
	if want := []string{"open cairn-state", "formatted"}; !slices.Equal(c.calls, want) {
		t.Errorf("crypt calls on resume = %q, want %q", c.calls, want)
	}
}

// Once the header says the filesystem is made, noise inside is refused by name, never formatted over.
func TestApplyEncryptedNoiseRefused(t *testing.T) {
	e := newEnv(t)
	c := e.withCrypt()
	if _, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{Encryption: config.EncryptionTPM})); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.mi, "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n")
	if _, err := c.inner.WriteAt(make([]byte, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.inner.WriteAt([]byte("\x8f\x13 noise"), 1024); err != nil {
		t.Fatal(err)
	}
	calls := len(e.runner.calls)
	_, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{}))
	if err == nil || !strings.Contains(err.Error(), "not Cairn's filesystem") {
		t.Errorf("Apply over a damaged filesystem = %v, want a refusal", err)
	}
	for _, call := range e.runner.calls[calls:] {
		if strings.HasPrefix(call, "mkfs") {
			t.Errorf("formatted over it: %s", call)
		}
	}
}
