package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// DefaultImageDir finds the built image: the _out directory of the repository the cairnctl binary
// was built in (the binary usually is _out/cairnctl itself), else ./_out.
func DefaultImageDir(executable string) string {
	if executable != "" {
		if exe, err := filepath.EvalSymlinks(executable); err == nil {
			executable = exe
		}
		for dir := filepath.Dir(executable); ; dir = filepath.Dir(dir) {
			if exists(filepath.Join(dir, "vmlinux")) {
				return dir
			}
			if exists(filepath.Join(dir, "_out", "vmlinux")) {
				return filepath.Join(dir, "_out")
			}
			if parent := filepath.Dir(dir); parent == dir {
				break
			}
		}
	}
	return "_out"
}

// Artifacts are the image files a boot mode needs, by their qemu.Config field. Payload is the vmlinux
// mode's payload disk, "" when the image was built without Kubernetes.
type Artifacts struct {
	Kernel, Initramfs, Payload, ISO, Raw string
}

// FindArtifacts checks that dir holds what mode boots from and returns absolute paths, or an error that
// says how to build the missing files.
func FindArtifacts(dir string, mode qemu.Mode) (Artifacts, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Artifacts{}, err
	}
	a := Artifacts{
		Kernel: filepath.Join(abs, "vmlinux"), Initramfs: filepath.Join(abs, "initramfs.cpio.zst"),
		ISO: filepath.Join(abs, "cairn.iso"), Raw: filepath.Join(abs, "cairn.raw"),
	}
	var need []string
	switch mode {
	case qemu.ModeVmlinux:
		need = []string{a.Kernel, a.Initramfs}
	case qemu.ModeISO, qemu.ModeISOUEFI:
		need = []string{a.ISO}
	case qemu.ModeRaw:
		need = []string{a.Raw}
	default:
		return Artifacts{}, fmt.Errorf("unknown boot mode %q (vmlinux, iso, iso-uefi or raw)", mode)
	}
	if p := filepath.Join(abs, "payload.squashfs"); mode == qemu.ModeVmlinux && exists(p) {
		a.Payload = p
	}
	var missing []string
	for _, p := range need {
		if !exists(p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return Artifacts{}, fmt.Errorf("the image for %s mode is not built: %s is missing (build it with `make image`, or pass --image-dir)",
			mode, strings.Join(missing, " and "))
	}
	return a, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
