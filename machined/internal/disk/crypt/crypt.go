// Package crypt makes and opens Cairn's encrypted volume: STATE, when machine.disks.state.encryption is
// "tpm". It is a LUKS2 volume whose key is a random 256-bit secret that never touches a disk in the clear:
// the volume's own header keeps it sealed to the machine's TPM, in a LUKS2 token (type cairn-tpm2), and
// only that TPM, with the PCRs of the policy below, gives it back. An optional recovery key, chosen by the
// admin's cairnctl at Init or Join and shown there once, opens the same volume with cryptsetup anywhere.
//
// cryptsetup rather than a Go LUKS2 implementation: the maintained Go code only opens LUKS2 volumes (none
// formats them or adds key slots and tokens), and the kernel's dm-crypt needs the device-mapper ioctls
// anyway. cryptsetup and its libraries add 3.5 MiB (compressed) to the boot part, libcrypto most of it;
// it is the tool the volume is recovered with on any other Linux machine, so the format is the common one
// by construction.
package crypt

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/machined/internal/tpm"
)

// PCRs are what the key is sealed to: 7, the firmware's Secure Boot state and keys (systemd-cryptenroll's
// default too: firmware and kernel updates leave it alone, turning Secure Boot off or enrolling other keys
// does not), and 15, Cairn's node lock, at zero. A node measures its lock into PCR 15 right after it has
// read the lock from STATE, at every boot, so the TPM releases the key only before that point: software
// running on the node later, even with the API's admin role, cannot unseal it again until a power cycle.
var PCRs = []int{7, tpm.PCR}

// TokenType is the LUKS2 token that carries the sealed key.
const TokenType = "cairn-tpm2"

// Sealer seals secrets to a TPM (*tpm.TPM).
type Sealer interface {
	SealTo(secret []byte, pcrs []int, want map[int][]byte) (*tpm.Sealed, error)
	Unseal(s *tpm.Sealed) ([]byte, error)
}

// Runner runs a tool to completion (apply.ExecRunner); a non-zero exit is an error.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Volumes formats and opens encrypted volumes.
type Volumes struct {
	Runner Runner
	// TPM opens the machine's TPM; the caller closes it (tpm.ErrNoTPM without one).
	TPM func() (Sealer, func(), error)
	// KeyDir is a directory in RAM (a tmpfs) where a key waits, for the moment cryptsetup reads it.
	KeyDir string
	// MapperDir is where opened volumes appear (/dev/mapper).
	MapperDir string
	// Prepare runs before a volume is made or opened: the kernel modules, the directories (nil: nothing).
	Prepare func(ctx context.Context) error
}

func (v *Volumes) prepare(ctx context.Context) error {
	if v.Prepare == nil {
		return nil
	}
	if err := v.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare for encrypted volumes: %w", err)
	}
	return nil
}

// ErrNoToken: the LUKS2 volume carries no Cairn key token, so Cairn cannot open it: a format cut short
// before the token was written, or a volume Cairn did not make.
var ErrNoToken = errors.New("the LUKS2 volume carries no " + TokenType + " token")

// UnlockError is a volume the TPM would not give the key of.
type UnlockError struct {
	Device string
	Err    error
}

func (e *UnlockError) Error() string {
	return fmt.Sprintf("%s is encrypted and this machine's TPM does not give its key back: %v. Nothing on the disk was changed; open it with its recovery key (cryptsetup open %s NAME) to read its data", e.Device, e.Err, e.Device)
}

func (e *UnlockError) Unwrap() error { return e.Err }

// token is the LUKS2 token: type and keyslots are LUKS2's, the rest Cairn's.
type token struct {
	Type     string   `json:"type"`
	Keyslots []string `json:"keyslots"`
	Public   []byte   `json:"cairn_tpm2_public"`
	Private  []byte   `json:"cairn_tpm2_private"`
	PCRs     []int    `json:"cairn_tpm2_pcrs"`
	// Formatted: the filesystem inside is made. Until then the volume holds what decrypting its unwritten
	// sectors gives, which looks like nothing at all, so the header says it.
	Formatted bool `json:"cairn_formatted,omitempty"`
}

// Key slots: 0 holds the TPM's key, 1 the recovery key.
const (
	tpmSlot      = "0"
	recoverySlot = "1"
)

// pbkdf is the key derivation of both slots. Both keys are random (256 and 160 bits), so stretching them
// buys nothing, and argon2id's default would cost seconds and a gigabyte of memory under emulation.
var pbkdf = []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"}

// MinRecoveryKey is the shortest recovery key accepted: the cheap derivation above is safe only for keys
// with the entropy of a random one (cairnctl makes 32 base-32 characters, 160 bits).
const MinRecoveryKey = 24

// Format makes dev a LUKS2 volume labelled label, its new key sealed into its header; recovery, when not
// empty, opens it too. Whatever dev held is lost: the caller has made sure it is Cairn's own empty
// partition.
func (v *Volumes) Format(ctx context.Context, dev, label, recovery string) error {
	if recovery != "" && len(recovery) < MinRecoveryKey {
		return fmt.Errorf("the recovery key has %d characters; at least %d are needed", len(recovery), MinRecoveryKey)
	}
	if err := v.prepare(ctx); err != nil {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	t, closeTPM, err := v.TPM()
	if err != nil {
		return fmt.Errorf("encrypt %s: %w", dev, err)
	}
	sealed, err := t.SealTo(key, PCRs, map[int][]byte{tpm.PCR: make([]byte, 32)})
	closeTPM()
	if err != nil {
		return fmt.Errorf("encrypt %s: %w", dev, err)
	}
	tok, err := json.Marshal(token{Type: TokenType, Keyslots: []string{tpmSlot}, Public: sealed.Public, Private: sealed.Private, PCRs: sealed.PCRs})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(v.KeyDir, "format-")
	if err != nil {
		return fmt.Errorf("encrypt %s: a place for the key in RAM: %w", dev, err)
	}
	defer os.RemoveAll(dir)
	keyFile, tokenFile, recoveryFile := filepath.Join(dir, "key"), filepath.Join(dir, "token.json"), filepath.Join(dir, "recovery")
	if err := writeFiles(map[string][]byte{keyFile: key, tokenFile: tok}); err != nil {
		return err
	}
	args := append([]string{"luksFormat", "--type", "luks2", "--batch-mode", "--label", label, "--key-file", keyFile, "--key-slot", tpmSlot}, pbkdf...)
	if _, err := v.Runner.Run(ctx, "cryptsetup", append(args, dev)...); err != nil {
		return fmt.Errorf("encrypt %s: %w", dev, err)
	}
	if recovery != "" {
		if err := writeFiles(map[string][]byte{recoveryFile: []byte(recovery)}); err != nil {
			return err
		}
		args := append([]string{"luksAddKey", "--batch-mode", "--key-file", keyFile, "--new-key-slot", recoverySlot}, pbkdf...)
		if _, err := v.Runner.Run(ctx, "cryptsetup", append(args, dev, recoveryFile)...); err != nil {
			return fmt.Errorf("encrypt %s: add the recovery key: %w", dev, err)
		}
	}
	// The token last: a volume with it is complete, one without it is a format cut short (ErrNoToken).
	if _, err := v.Runner.Run(ctx, "cryptsetup", "token", "import", "--json-file", tokenFile, "--token-id", "0", dev); err != nil {
		return fmt.Errorf("encrypt %s: store the sealed key: %w", dev, err)
	}
	return nil
}

// Open opens dev as MapperDir/name with the key its token holds, and returns the opened device; an
// already open one is returned as it is (find-state opened it earlier in this boot). A TPM that refuses
// is an *UnlockError.
func (v *Volumes) Open(ctx context.Context, dev, name string) (string, error) {
	if err := v.prepare(ctx); err != nil {
		return "", err
	}
	mapped := filepath.Join(v.MapperDir, name)
	if _, err := os.Stat(mapped); err == nil {
		return mapped, nil
	}
	dir, err := os.MkdirTemp(v.KeyDir, "open-")
	if err != nil {
		return "", fmt.Errorf("open %s: a place for the key in RAM: %w", dev, err)
	}
	defer os.RemoveAll(dir)
	tok, err := v.readToken(ctx, dev, filepath.Join(dir, "token.json"))
	if err != nil {
		return "", err
	}
	t, closeTPM, err := v.TPM()
	if err != nil {
		return "", &UnlockError{Device: dev, Err: err}
	}
	key, err := t.Unseal(&tpm.Sealed{Public: tok.Public, Private: tok.Private, PCRs: tok.PCRs})
	closeTPM()
	if err != nil {
		return "", &UnlockError{Device: dev, Err: err}
	}
	keyFile := filepath.Join(dir, "key")
	if err := writeFiles(map[string][]byte{keyFile: key}); err != nil {
		return "", err
	}
	if _, err := v.Runner.Run(ctx, "cryptsetup", "open", "--type", "luks2", "--key-file", keyFile, "--key-slot", tpmSlot, dev, name); err != nil {
		return "", fmt.Errorf("open %s: %w", dev, err)
	}
	return mapped, nil
}

// Close closes MapperDir/name when it is open.
func (v *Volumes) Close(ctx context.Context, name string) error {
	if _, err := os.Stat(filepath.Join(v.MapperDir, name)); err != nil {
		return nil
	}
	if _, err := v.Runner.Run(ctx, "cryptsetup", "close", name); err != nil {
		return fmt.Errorf("close the encrypted volume %s: %w", name, err)
	}
	return nil
}

// Inspect reports whether dev's LUKS2 header carries Cairn's sealed key (false for a format cut short)
// and whether the filesystem inside is made (Formatted).
func (v *Volumes) Inspect(ctx context.Context, dev string) (sealed, formatted bool, err error) {
	if err := v.prepare(ctx); err != nil {
		return false, false, err
	}
	dir, err := os.MkdirTemp(v.KeyDir, "token-")
	if err != nil {
		return false, false, err
	}
	defer os.RemoveAll(dir)
	tok, err := v.readToken(ctx, dev, filepath.Join(dir, "token.json"))
	if errors.Is(err, ErrNoToken) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, tok.Formatted, nil
}

// Formatted records in dev's header that the filesystem inside is made: from then on what the volume
// holds is checked, never formatted again.
func (v *Volumes) Formatted(ctx context.Context, dev string) error {
	dir, err := os.MkdirTemp(v.KeyDir, "token-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "token.json")
	tok, err := v.readToken(ctx, dev, file)
	if err != nil {
		return err
	}
	tok.Formatted = true
	b, err := json.Marshal(tok)
	if err != nil {
		return err
	}
	if err := writeFiles(map[string][]byte{file: b}); err != nil {
		return err
	}
	if _, err := v.Runner.Run(ctx, "cryptsetup", "token", "import", "--json-file", file, "--token-id", "0", "--token-replace", dev); err != nil {
		return fmt.Errorf("%s: record that its filesystem is made: %w", dev, err)
	}
	return nil
}

func (v *Volumes) readToken(ctx context.Context, dev, file string) (token, error) {
	var tok token
	// cryptsetup's exit status for a missing token is the same as for an unreadable header, so the
	// header is read first: `isLuks` fails only for the latter.
	if _, err := v.Runner.Run(ctx, "cryptsetup", "isLuks", "--type", "luks2", dev); err != nil {
		return tok, fmt.Errorf("%s: not a LUKS2 volume: %w", dev, err)
	}
	if _, err := v.Runner.Run(ctx, "cryptsetup", "token", "export", "--token-id", "0", "--json-file", file, dev); err != nil {
		return tok, fmt.Errorf("%s: %w", dev, ErrNoToken)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return tok, err
	}
	if err := json.Unmarshal(b, &tok); err != nil || tok.Type != TokenType || len(tok.Public) == 0 || len(tok.Private) == 0 || len(tok.PCRs) == 0 {
		return tok, fmt.Errorf("%s: token 0 is not a complete %s token (%.80s): %w", dev, TokenType, strings.TrimSpace(string(b)), ErrNoToken)
	}
	return tok, nil
}

func writeFiles(files map[string][]byte) error {
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
