package cmdline

import "fmt"

// Kernel is the kernel's own command line.
const Kernel = "/proc/cmdline"

// FwCfg is where QEMU's -fw_cfg passes per-node kernel arguments to a node booted from the ISO or the
// raw disk, whose own command line is baked into the image. It exists once the qemu_fw_cfg module is
// loaded, on a machine QEMU runs.
const FwCfg = "/sys/firmware/qemu_fw_cfg/by_name/opt/dev.cairn/cmdline/raw"

// Read returns the node's command line: the kernel's, then the per-node arguments from QEMU's fw_cfg
// when there are any. readFile is os.ReadFile outside tests.
func Read(readFile func(string) ([]byte, error)) (string, error) {
	line, err := readFile(Kernel)
	if err != nil {
		return "", fmt.Errorf("read the kernel command line: %w", err)
	}
	return WithFwCfg(line, readFile), nil
}

// WithFwCfg returns the kernel's line followed by the per-node arguments from QEMU's fw_cfg, when
// there are any: for a caller that read the kernel's line already.
func WithFwCfg(kernel []byte, readFile func(string) ([]byte, error)) string {
	line := string(kernel)
	if extra, err := readFile(FwCfg); err == nil {
		line += " " + string(extra)
	}
	return line
}
