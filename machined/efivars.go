package main

import (
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/machined/internal/slots"
	"github.com/cairn-os/cairn/machined/internal/sys"
)

// efiVarsDir is where efivarfs goes: systemd-boot's variables say which boot entry (slot) started.
const efiVarsDir = "/sys/firmware/efi/efivars"

// efiVars mounts efivarfs once, on a machine that booted through UEFI, the first time a variable is read.
type efiVars struct {
	load func(names ...string)
	log  *slog.Logger
	once sync.Once
}

func (e *efiVars) ensure() {
	e.once.Do(func() {
		if _, err := os.Stat("/sys/firmware/efi"); err != nil {
			return // booted through a BIOS, or vmlinux mode: no EFI variables
		}
		e.load("efivarfs") // no modprobe for the kernel to ask
		m := sys.Mount{Source: "efivarfs", Target: efiVarsDir, FSType: "efivarfs", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY}
		if err := m.Apply(); err != nil {
			e.log.Warn("efivarfs: which boot slot started is unknown", "error", err)
		}
	})
}

// bootedSlot is the slot systemd-boot started, "" when unknown.
func (e *efiVars) bootedSlot() string {
	e.ensure()
	b, err := slots.Booted(efiVarsDir)
	if err != nil {
		return ""
	}
	return b.Slot
}
