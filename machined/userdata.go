package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/node"
	cloud "github.com/cairn-os/cairn/machined/internal/platform"
	"github.com/cairn-os/cairn/machined/internal/sys"
)

// seedDir is where a seed volume (NoCloud's CIDATA, OpenStack's config-2) is mounted while it is read.
const seedDir = "/run/cairn/seed"

// seedMountOptions: vfat's default character set is the kernel's (utf8), whose module the image does
// not carry; a seed's names are ASCII, so the ESP's code page and character set do (their modules are
// in the image). Without them the mount failed with EINVAL.
var seedMountOptions = map[string]string{"vfat": "codepage=437,iocharset=iso8859-1"}

// userDataSearch is an unconfigured node's search for user data (node.Options.Platform): once the
// disk drivers and the filesystems a seed volume uses (vfat, isofs) are loaded, the platform package
// tries its sources in order.
func userDataSearch(scanner inventory.Scanner, mods *bootModules, cmdline map[string]string, log *slog.Logger) func(context.Context) (node.PlatformAnswer, error) {
	s := cloud.Search{
		Disks: scanner.Scan,
		Mount: func(dev, dir, fstype string) error {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			return sys.Mounter{}.Mount(dev, dir, fstype, unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID|unix.MS_NOEXEC, seedMountOptions[fstype])
		},
		Unmount: func(dir string) error { return sys.Mounter{}.Unmount(dir, false) },
		Dir:     seedDir, Cmdline: cmdline, Log: log,
		MACs: func() (map[string]string, error) {
			ifs, err := net.Interfaces()
			if err != nil {
				return nil, err
			}
			macs := map[string]string{}
			for _, i := range ifs {
				if len(i.HardwareAddr) > 0 {
					macs[strings.ToLower(i.HardwareAddr.String())] = i.Name
				}
			}
			return macs, nil
		},
	}
	return func(ctx context.Context) (node.PlatformAnswer, error) {
		if err := mods.waitDisks(ctx); err != nil {
			return node.PlatformAnswer{}, err
		}
		select {
		case <-mods.all:
		case <-ctx.Done():
			return node.PlatformAnswer{}, ctx.Err()
		}
		a, err := s.Run(ctx)
		ans := node.PlatformAnswer{Tried: a.Tried}
		if m := a.Metadata; m != nil {
			ans.Source, ans.UserData, ans.Hostname, ans.Network = m.Platform, m.UserData, m.Hostname, a.Network
		}
		return ans, err
	}
}
