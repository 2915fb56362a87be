//go:build integration && cgo

package crypt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2/transport/simulator"

	"github.com/cairn-os/cairn/machined/internal/tpm"
)

// simTPM is one TPM simulator for the whole test: a second OpenSimulator is another TPM, with another
// storage root key, which is how "another machine" is made below.
func simTPM(t *testing.T) *tpm.TPM {
	t.Helper()
	sim, err := simulator.OpenSimulator()
	if err != nil {
		t.Skipf("TPM simulator: %v", err)
	}
	tp := tpm.New(sim)
	t.Cleanup(func() { tp.Close() })
	return tp
}

func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (loop devices)")
	}
	for _, tool := range []string{"losetup", "cryptsetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CAIRN_REQUIRE_TOOLS") == "1" {
				t.Fatalf("tool %s is required (CAIRN_REQUIRE_TOOLS=1) but not found", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	file := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

func digest(t *testing.T, dev string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(dev)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// execRunner runs the real cryptsetup (apply.ExecRunner's job on a node; apply imports this package).
type execRunner struct{}

func (execRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return out, nil
}

func testPassphrase(dev, keyFile string) error {
	out, err := exec.Command("cryptsetup", "open", "--test-passphrase", "--key-file", keyFile, dev).CombinedOutput()
	if err != nil {
		return errors.New(strings.TrimSpace(string(out)))
	}
	return nil
}

// The volume Format makes is a LUKS2 volume that cryptsetup opens with the recovery key, whose token
// gives the key back only on the TPM that sealed it; another machine's TPM gets an UnlockError and leaves
// the disk exactly as it was.
func TestFormatOpen(t *testing.T) {
	ctx := context.Background()
	dev := loopDevice(t, 64<<20)
	mine := simTPM(t)
	use := func(s Sealer) func() (Sealer, func(), error) {
		return func() (Sealer, func(), error) { return s, func() {}, nil }
	}
	v := &Volumes{Runner: execRunner{}, TPM: use(mine), KeyDir: t.TempDir(), MapperDir: t.TempDir()}

	if ok, _, err := v.Inspect(ctx, dev); err == nil || ok {
		t.Errorf("Inspect of a blank device = %v, %v; want an error (not LUKS2)", ok, err)
	}
	const recovery = "ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23-4567"
	if err := v.Format(ctx, dev, "CAIRN-STATE", recovery); err != nil {
		t.Fatalf("Format = %v", err)
	}
	if sealed, formatted, err := v.Inspect(ctx, dev); err != nil || !sealed || formatted {
		t.Fatalf("Inspect after Format = %v, %v, %v; want sealed, not formatted", sealed, formatted, err)
	}
	if err := v.Formatted(ctx, dev); err != nil {
		t.Fatalf("Formatted = %v", err)
	}
	if sealed, formatted, err := v.Inspect(ctx, dev); err != nil || !sealed || !formatted {
		t.Fatalf("Inspect after Formatted = %v, %v, %v; want sealed and formatted", sealed, formatted, err)
	}
	if entries, _ := os.ReadDir(v.KeyDir); len(entries) != 0 {
		t.Errorf("Format left %d entries in the key directory", len(entries))
	}
	keys := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(keys, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := testPassphrase(dev, write("recovery", []byte(recovery))); err != nil {
		t.Errorf("the recovery key does not open the volume: %v", err)
	}
	if err := testPassphrase(dev, write("wrong", []byte("ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23-4568"))); err == nil {
		t.Errorf("a wrong recovery key opens the volume")
	}
	tok, err := v.readToken(ctx, dev, filepath.Join(keys, "token.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(tok.Private, []byte(recovery)) {
		t.Errorf("the token holds the recovery key")
	}
	key, err := mine.Unseal(&tpm.Sealed{Public: tok.Public, Private: tok.Private, PCRs: tok.PCRs})
	if err != nil {
		t.Fatalf("the token's key does not unseal on the TPM that sealed it: %v", err)
	}
	if err := testPassphrase(dev, write("key", key)); err != nil {
		t.Errorf("the sealed key does not open the volume: %v", err)
	}

	// The same machine once its lock is measured (PCR 15 no longer zero) refuses, and writes nothing.
	before := digest(t, dev)
	if err := mine.Extend(tpm.PCR, sha256.Sum256([]byte("lock"))); err != nil {
		t.Fatal(err)
	}
	var unlock *UnlockError
	if _, err := v.Open(ctx, dev, "cairn-test-state"); !errors.As(err, &unlock) || !errors.Is(err, tpm.ErrPCRsChanged) {
		t.Errorf("Open after the lock was measured = %v; want an UnlockError wrapping ErrPCRsChanged", err)
	}

	// Another machine (the simulator runs one TPM at a time: a new one has new seeds): its TPM refuses.
	mine.Close()
	other := *v
	other.TPM = use(simTPM(t))
	if _, err := other.Open(ctx, dev, "cairn-test-state"); !errors.As(err, &unlock) || !errors.Is(err, tpm.ErrPCRsChanged) {
		t.Errorf("Open with another TPM = %v; want an UnlockError wrapping ErrPCRsChanged", err)
	}
	if digest(t, dev) != before {
		t.Errorf("the refused Opens changed the disk")
	}
}

// A format cut short before its token leaves a LUKS2 header without one: Inspect says so (Init formats it
// again) and Open refuses with ErrNoToken instead of asking the TPM.
func TestNoToken(t *testing.T) {
	ctx := context.Background()
	dev := loopDevice(t, 32<<20)
	keyFile := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(keyFile, bytes.Repeat([]byte{7}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cryptsetup", append([]string{"luksFormat", "--type", "luks2", "--batch-mode", "--key-file", keyFile}, append(pbkdf, dev)...)...).CombinedOutput(); err != nil {
		t.Fatalf("luksFormat: %v: %s", err, out)
	}
	v := &Volumes{Runner: execRunner{}, KeyDir: t.TempDir(), MapperDir: t.TempDir(),
		TPM: func() (Sealer, func(), error) { return nil, nil, errors.New("the TPM must not be asked") }}
	if ok, _, err := v.Inspect(ctx, dev); err != nil || ok {
		t.Errorf("Inspect = %v, %v; want false, nil", ok, err)
	}
	if _, err := v.Open(ctx, dev, "cairn-test"); !errors.Is(err, ErrNoToken) {
		t.Errorf("Open = %v; want ErrNoToken", err)
	}
}
