package main

import (
	"context"
	"os"

	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/crypt"
	"github.com/cairn-os/cairn/machined/internal/modules"
	"github.com/cairn-os/cairn/machined/internal/proc"
	"github.com/cairn-os/cairn/machined/internal/tpm"
)

// stateCrypt is a real node's encrypted-STATE tooling: cryptsetup, the machine's TPM and the kernel
// modules they need, loaded when an encrypted volume is first made or opened.
func stateCrypt(mods *bootModules, starter proc.Starter) *crypt.Volumes {
	return &crypt.Volumes{
		Runner: apply.ExecRunner{Starter: starter},
		// /run is a tmpfs: a key written there for cryptsetup never reaches a disk.
		KeyDir:    "/run/cairn/keys",
		MapperDir: "/dev/mapper",
		Prepare: func(context.Context) error {
			mods.load("encryption", func() []string { return modules.Encryption })
			// cryptsetup's lock directory; it warns on every call without it.
			if err := os.MkdirAll("/run/cryptsetup", 0o700); err != nil {
				return err
			}
			return os.MkdirAll("/run/cairn/keys", 0o700)
		},
		TPM: func() (crypt.Sealer, func(), error) {
			t, err := tpm.Open(tpm.DevicePath)
			if err != nil {
				return nil, nil, err
			}
			return t, func() { t.Close() }, nil
		},
	}
}

// hasTPM says whether the machine has a TPM 2.0 an encrypted STATE's key can be sealed to.
func hasTPM() bool {
	_, err := os.Stat(tpm.DevicePath)
	return err == nil
}
