package apply

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/cairn-os/cairn/machined/internal/disk/plan"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

// Crypter makes and opens encrypted volumes (*crypt.Volumes).
type Crypter interface {
	// Format makes dev a LUKS2 volume labelled label with a new key sealed to the TPM; recovery, when not
	// empty, opens it too.
	Format(ctx context.Context, dev, label, recovery string) error
	// Open opens dev under the mapper name and returns the opened device's path.
	Open(ctx context.Context, dev, name string) (string, error)
	// Inspect reports whether dev's header carries the sealed key (false for a format cut short) and
	// whether the filesystem inside is made.
	Inspect(ctx context.Context, dev string) (sealed, formatted bool, err error)
	// Formatted records in dev's header that the filesystem inside is made.
	Formatted(ctx context.Context, dev string) error
	// Close closes the opened volume of that name, if it is open.
	Close(ctx context.Context, name string) error
}

// MapperName is the name an encrypted volume is opened under (/dev/mapper/cairn-state).
func MapperName(v plan.Volume) string { return "cairn-" + strings.ToLower(string(v)) }

// unlock opens the encrypted volume on part, making it first when part is still empty (blank) or holds a
// LUKS2 header without the sealed key (a format cut short: nothing was ever written inside, since the
// key is stored before the first open). It returns the opened device, its device number and the
// filesystem inside: "" when the header says none is made yet (mkfs, then Formatted), whatever the
// volume holds then, which is only what decrypting unwritten sectors gives.
func (a *Applier) unlock(ctx context.Context, s plan.Step, part string, blank bool) (dev, devNum, fstype string, did []string, err error) {
	if a.Crypt == nil {
		return "", "", "", nil, fmt.Errorf("%s: %s is encrypted, and this node does not open encrypted volumes (sandbox mode has no TPM of its own)", s.Field, part)
	}
	formatted := false
	if !blank {
		sealed, made, err := a.Crypt.Inspect(ctx, part)
		if err != nil {
			return "", "", "", nil, fmt.Errorf("%s: %w", s.Field, err)
		}
		if !sealed {
			a.logf("%s: %s is a LUKS2 volume without its sealed key (a format cut short): encrypting it again", s.Volume, part)
			blank = true
		}
		formatted = sealed && made
	}
	if blank {
		a.logf("%s: encrypting %s (LUKS2, the key sealed to the TPM)", s.Volume, part)
		if err := a.Crypt.Format(ctx, part, s.FSLabel, a.RecoveryKey); err != nil {
			return "", "", "", nil, fmt.Errorf("%s: %w", s.Field, err)
		}
		did = append(did, "encrypted "+part)
	}
	a.logf("%s: opening %s with the key sealed to the TPM", s.Volume, part)
	if dev, err = a.Crypt.Open(ctx, part, MapperName(s.Volume)); err != nil {
		return "", "", "", did, fmt.Errorf("%s: %w", s.Field, err)
	}
	did = append(did, fmt.Sprintf("opened %s as %s", part, dev))
	if devNum, err = a.devNumber(dev); err != nil {
		return "", "", "", did, fmt.Errorf("%s: %w", s.Field, err)
	}
	if !formatted {
		return dev, devNum, "", did, nil
	}
	fstype, err = a.innerFS(dev, s)
	return dev, devNum, fstype, did, err
}

// innerFS is the filesystem inside an opened volume whose header says it is made: Cairn's, or a refusal
// naming what is there (nothing is formatted over it).
func (a *Applier) innerFS(dev string, s plan.Step) (string, error) {
	f, err := a.readDevice(dev)
	if err != nil {
		return "", fmt.Errorf("%s: read the opened volume %s: %w", s.Field, dev, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", fmt.Errorf("%s: size of %s: %w", s.Field, dev, err)
	}
	sigs, err := probe.Probe(f, size)
	if err != nil {
		return "", fmt.Errorf("%s: probe %s: %w", s.Field, dev, err)
	}
	switch {
	case len(sigs) == 1 && (sigs[0].Type == probe.TypeXFS || sigs[0].Type == probe.TypeExt4) && sigs[0].Label == s.FSLabel && sigs[0].Problem == "":
		return sigs[0].Type, nil
	}
	return "", fmt.Errorf("%s: the encrypted volume %s holds %s, not Cairn's filesystem labelled %s; nothing was changed",
		s.Field, dev, probe.Describe(sigs), s.FSLabel)
}

// ReadSeekCloser is an opened volume as innerFS reads it.
type ReadSeekCloser interface {
	io.ReaderAt
	io.Seeker
	io.Closer
}

func (a *Applier) readDevice(path string) (ReadSeekCloser, error) {
	if a.ReadDevice != nil {
		return a.ReadDevice(path)
	}
	return os.Open(path)
}

func (a *Applier) devNumber(path string) (string, error) {
	if a.DevNumber != nil {
		return a.DevNumber(path)
	}
	return DevNumber(path)
}

// DevNumber is the MAJOR:MINOR of the device file at path, as the mount table spells it.
func DevNumber(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.Mode()&os.ModeDevice == 0 {
		return "", fmt.Errorf("%s is not a device", path)
	}
	// Linux's encoding of dev_t (the kernel's new_decode_dev).
	rdev := st.Rdev
	major := (rdev>>8)&0xfff | (rdev>>32)&^uint64(0xfff)
	minor := rdev&0xff | (rdev>>12)&^uint64(0xff)
	return fmt.Sprintf("%d:%d", major, minor), nil
}
