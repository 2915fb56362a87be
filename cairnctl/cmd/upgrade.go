package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/upgrade"
)

func newUpgrade(g *globals) *cobra.Command {
	var stage bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "upgrade --image FILE",
		Short: "Write a new image into the node's other boot slot and reboot into it, with automatic fallback (admin)",
		Long: `upgrade streams an upgrade bundle (cairn-upgrade.tar, which make image writes beside the other
artifacts) to the node. The node checks the bundle against its manifest (SHA-256 and size of each part; a
Kubernetes version that skips a minor or goes back is refused), writes the payload and the boot entry into
the slot that did not boot (A or B; the running slot is never touched), drains the node (cordon, evict its
pods with their disruption budgets respected) and reboots into the new slot once, on trial.

The new slot is kept only when the node reaches Running and its health checks pass within --timeout. If it
does not (a kernel panic, machined failing, a power cut during that boot, or the timeout), the next boot
starts the old slot again by itself and an upgrade event says why. A control plane whose going down would
lose etcd's quorum is refused. 'cairnctl version' shows both slots; 'cairnctl rollback' goes back.

Upgrades need a node booted from a disk with slots (cairn.raw, or an installed disk), not the ISO.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, _ := cmd.Flags().GetString("image")
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			br, err := upgrade.NewReader(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "%s: Cairn %s with Kubernetes %s (%d MiB)\n", filepath.Base(path), br.Manifest.Version, br.Manifest.Kubernetes, fi.Size()>>20)
			h := &machine.UpgradeHeader{Size: uint64(fi.Size()), Stage: stage, TimeoutSeconds: uint32(timeout / time.Second)}
			return g.eachNode(func(nc nodeClient, prefix string) error {
				if err := sendUpgrade(cmd.Context(), nc, path, h, func(msg string) { fmt.Fprintf(g.stderr, "%s%s\n", prefix, msg) }); err != nil {
					return err
				}
				if stage {
					fmt.Fprintf(g.stdout, "%snode %s: %s staged; it boots at the next reboot\n", prefix, nc.name, br.Manifest.Version)
				} else {
					fmt.Fprintf(g.stdout, "%snode %s is rebooting into %s ('cairnctl version' shows the slots once it is back)\n", prefix, nc.name, br.Manifest.Version)
				}
				return nil
			})
		},
	}
	c.Flags().String("image", "", "the upgrade bundle (_out/cairn-upgrade.tar)")
	_ = c.MarkFlagRequired("image")
	c.Flags().BoolVar(&stage, "stage", false, "write the slot and boot it at the next reboot, without rebooting now")
	c.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long the new slot's first boot has to become Running and healthy before the node falls back")
	return c
}

// sendUpgrade sends the header and the bundle to one node while it prints the node's progress.
func sendUpgrade(ctx context.Context, nc machine.MachineClient, path string, h *machine.UpgradeHeader, progress func(string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := nc.Upgrade(ctx)
	if err != nil {
		return err
	}
	sendErr := make(chan error, 1)
	go func() {
		err := sendBundle(stream, path, h)
		if err != nil {
			cancel() // the node must not take a partial bundle for a whole one
		}
		sendErr <- err
	}()
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return <-sendErr
		}
		if err != nil {
			if serr := <-sendErr; serr != nil {
				return serr
			}
			return err
		}
		progress(e.Message)
	}
}

func sendBundle(stream machine.Machine_UpgradeClient, path string, h *machine.UpgradeHeader) error {
	if err := stream.Send(&machine.UpgradeRequest{Msg: &machine.UpgradeRequest_Header{Header: h}}); err != nil {
		return nil // the node ended the call: Recv says why
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if serr := stream.Send(&machine.UpgradeRequest{Msg: &machine.UpgradeRequest_Data{Data: buf[:n]}}); serr != nil {
				return nil
			}
		}
		if errors.Is(err, io.EOF) {
			return stream.CloseSend()
		}
		if err != nil {
			return err
		}
	}
}

func newRollback(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rollback",
		Short: "Boot the other slot (the image that ran before the last upgrade) from now on (admin)",
		Long: `rollback makes the node's other boot slot boot next, for good, then drains the node and reboots it. The
other slot must have run before: one whose trial boot failed, or that was never booted, is refused.
'cairnctl version' shows both slots.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.Rollback(cmd.Context(), &machine.RollbackRequest{})
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%snode %s is rebooting into slot %s (%s)\n", prefix, nc.name, r.Slot, r.Version)
				return nil
			})
		},
	}
}

func newGenUpgradeKey(g *globals) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "upgrade-key FILE",
		Short: "Write a key that signs upgrade bundles, and print the public key for machine.upgrade.publicKey",
		Long: `gen upgrade-key writes a new Ed25519 private key to FILE (PEM, mode 0600) and prints its public key.
Build signed bundles with 'make image SIGN_KEY=FILE'; a node whose config has
  machine:
    upgrade:
      publicKey: <the printed key>
then takes only bundles signed by it. Keep FILE off the nodes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			keyPEM, pub, err := upgrade.GenerateKey()
			if err != nil {
				return err
			}
			flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
			if force {
				flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			}
			f, err := os.OpenFile(args[0], flags, 0o600)
			if err != nil {
				return fmt.Errorf("%w (--force overwrites)", err)
			}
			if _, err := f.Write(keyPEM); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintln(g.stdout, pub)
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "overwrite FILE")
	return c
}
