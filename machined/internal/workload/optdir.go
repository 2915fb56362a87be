package workload

import (
	"context"
	"fmt"
	"os"

	"github.com/cairn-os/cairn/machined/internal/kube"
)

// A network add-on of the user's (cni: none) installs its CNI plugins on the host as on any
// distribution: its DaemonSet mounts /opt/cni/bin (a hostPath, DirectoryOrCreate) and copies them there.
// The root image is read-only, so without a writable /opt that mount fails ("mkdir /opt: read-only file
// system") and no pod gets a network. /opt is EPHEMERAL's /var/opt, bound at every boot before
// containerd starts; containerd looks for plugins there after the payload's (kube.Layout.AddonCNIBinDir).

// optDir makes /opt writable and /opt/cni/bin present (the "opt-dir" task).
func (w *Workload) optDir(context.Context) error {
	return makeOptDir(w.Renderer().Layout(), w.Bind)
}

// makeOptDir binds l's OptStore onto its Opt, then makes the add-ons' CNI plugin directory. bind is nil
// in sandbox mode, where /opt is a plain directory under the sandbox's root.
func makeOptDir(l kube.Layout, bind func(src, dst string) error) error {
	if bind != nil {
		if err := bindDir(bind, l.OptStore(), l.Opt()); err != nil {
			return fmt.Errorf("make %s writable: %w", l.Opt(), err)
		}
	}
	return os.MkdirAll(l.AddonCNIBinDir(), 0o755)
}
