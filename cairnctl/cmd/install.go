package cmd

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
)

func newInstall(g *globals) *cobra.Command {
	var disk string
	var wipe, noReboot bool
	c := &cobra.Command{
		Use:   "install [--disk serial=...] [--wipe] [--no-reboot]",
		Short: "Install Cairn from the ISO the node booted from onto one of its disks, then boot from it (admin)",
		Long: `install writes the build the node runs onto a disk, with the layout of cairn.raw: an EFI system
partition holding systemd-boot and slot A's boot entry (made on the node from the ISO's kernel, initramfs
and command line), and the payload slots A and B, A holding the payload (read back and checked). The node
must have booted from Cairn's ISO; it may be in maintenance (Boot) or Running.

The disk is chosen by --disk, a selector of KEY=VALUE pairs joined by commas (path, serial, model, wwn,
label, minSize, maxSize: every one given must match, exactly one disk may), or else by the config's
machine.install.disk. The rules of Cairn's volumes apply: never the boot medium, a disk in use or one
with a mounted filesystem; only a blank disk, unless --wipe (or machine.install.wipe) says to erase it.
A refusal names the disk and what it holds, and changes nothing. Cairn's volumes (STATE, EPHEMERAL,
ETCD) stay on their own disks: the node keeps its lock and data.

Then the node reboots, as 'cairnctl reboot' does (--no-reboot stays on the ISO), and the firmware boots
the disk if it prefers it to the ISO: take the ISO out, or put the disk first in the boot order.
The disk is UEFI-only. From there 'cairnctl upgrade' works.`,
		Example: `  cairnctl install --disk serial=S3Z9NB0K123456
  cairnctl install --disk path=/dev/nvme0n1,minSize=100GiB --wipe`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sel, err := parseSelector(disk)
			if err != nil {
				return err
			}
			req := &machine.InstallRequest{Disk: sel, Wipe: wipe, NoReboot: noReboot}
			return g.eachNode(func(nc nodeClient, prefix string) error {
				stream, err := nc.Install(cmd.Context(), req)
				if err != nil {
					return err
				}
				for {
					e, err := stream.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						return err
					}
					fmt.Fprintf(g.stderr, "%s%s\n", prefix, e.Message)
				}
				if noReboot {
					fmt.Fprintf(g.stdout, "%snode %s: installed; it boots from the disk at the next reboot\n", prefix, nc.name)
				} else {
					fmt.Fprintf(g.stdout, "%snode %s is rebooting from the disk it was installed on\n", prefix, nc.name)
				}
				return nil
			})
		},
	}
	c.Flags().StringVar(&disk, "disk", "", "the disk: KEY=VALUE[,KEY=VALUE] with keys path, serial, model, wwn, label, minSize, maxSize (default: the config's machine.install.disk)")
	c.Flags().BoolVar(&wipe, "wipe", false, "erase what the disk holds (without it only a blank disk is taken)")
	c.Flags().BoolVar(&noReboot, "no-reboot", false, "stay on the ISO; the disk boots at the next reboot")
	return c
}

// parseSelector reads --disk's KEY=VALUE pairs; "" is no selector (the node's config decides).
func parseSelector(s string) (*machine.DiskSelector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var sel config.Selector
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return nil, fmt.Errorf("--disk: %q is not KEY=VALUE", kv)
		}
		known, err := sel.Set(k, v)
		if err != nil {
			return nil, fmt.Errorf("--disk %w", err)
		}
		if !known {
			return nil, fmt.Errorf("--disk: unknown key %q (%s)", k, config.SelectorKeys)
		}
	}
	return &machine.DiskSelector{Path: sel.Path, Serial: sel.Serial, Model: sel.Model, Wwn: sel.WWN, Label: sel.Label,
		MinSize: uint64(sel.MinSize), MaxSize: uint64(sel.MaxSize)}, nil
}
