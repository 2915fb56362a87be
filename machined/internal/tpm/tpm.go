// Package tpm is Cairn's use of a TPM 2.0 for the measured lock (Constellation's point of no return, made
// visible to anyone who can read a quote): when a node takes its lock, and again at every boot of a locked
// node (PCRs start from zero at power-on), machined extends PCR 15 with an event naming the cluster ID and
// the node's role, and writes the events of this boot to its own measurement log on STATE. Replaying the
// log must give the PCR's value: when it does not, something else extended the PCR, and the node says so.
// A machine without a TPM runs the same, without the measurement, and says so in status.
//
// PCR 15 because firmware and boot loaders leave it alone (0-7 are the firmware's, 8-14 the boot loaders'
// and the OS loader's, 16 is the resettable debug PCR) and Constellation measures its cluster ID there too.
package tpm

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxtpm"
)

// PCR is the PCR Cairn measures the lock into.
const PCR = 15

// DevicePath is the kernel's TPM resource manager: it lets machined and any other user share the TPM.
const DevicePath = "/dev/tpmrm0"

// TPM is an open TPM.
type TPM struct {
	t transport.TPMCloser
}

// Open opens the TPM at path; ErrNoTPM when the machine has none.
func Open(path string) (*TPM, error) {
	t, err := linuxtpm.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoTPM
	}
	if err != nil {
		return nil, fmt.Errorf("open the TPM %s: %w", path, err)
	}
	return New(t), nil
}

// ErrNoTPM: the machine has no TPM (no /dev/tpmrm0).
var ErrNoTPM = errors.New("this machine has no TPM 2.0 (no " + DevicePath + ")")

// New wraps an open transport (a device, or a simulator in tests).
func New(t transport.TPMCloser) *TPM { return &TPM{t: t} }

// Close closes the TPM.
func (t *TPM) Close() error { return t.t.Close() }

// Extend extends a PCR's SHA-256 bank with a digest.
func (t *TPM) Extend(pcr int, digest [sha256.Size]byte) error {
	_, err := tpm2.PCRExtend{
		PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(pcr), Auth: tpm2.PasswordAuth(nil)},
		Digests:   tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: digest[:]}}},
	}.Execute(t.t)
	if err != nil {
		return fmt.Errorf("extend PCR %d: %w", pcr, err)
	}
	return nil
}

// Read reads PCRs of the SHA-256 bank, in the order asked.
func (t *TPM) Read(pcrs ...int) ([][]byte, error) {
	out := make([][]byte, 0, len(pcrs))
	// A TPM answers at most eight PCRs per read.
	for start := 0; start < len(pcrs); start += 8 {
		chunk := pcrs[start:min(start+8, len(pcrs))]
		in, err := pcrSelection(chunk)
		if err != nil {
			return nil, err
		}
		r, err := tpm2.PCRRead{PCRSelectionIn: in}.Execute(t.t)
		if err != nil {
			return nil, fmt.Errorf("read PCRs %v: %w", chunk, err)
		}
		// The answer is in ascending PCR order; map it back to the order asked.
		got := map[int][]byte{}
		sorted := slices.Sorted(slices.Values(chunk))
		for i, d := range r.PCRValues.Digests {
			if i < len(sorted) {
				got[sorted[i]] = d.Buffer
			}
		}
		for _, p := range chunk {
			v, ok := got[p]
			if !ok {
				return nil, fmt.Errorf("the TPM did not return PCR %d", p)
			}
			out = append(out, v)
		}
	}
	return out, nil
}
