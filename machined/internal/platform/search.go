package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

// Seed volume labels: NoCloud's (either case, as cloud-init accepts) and OpenStack's config drive.
var (
	noCloudLabels   = []string{"CIDATA", "cidata"}
	configDriveLabs = []string{"config-2", "CONFIG-2"}
)

// Search is the platform search of an unconfigured node: it finds the seed volumes among the disks,
// mounts them read-only, builds the sources in their fixed order and runs Discover. The system is in
// its fields, so it runs in a unit test.
type Search struct {
	// Disks lists the machine's disks with what is on them (inventory.Scanner.Scan).
	Disks func(context.Context) ([]inventory.Disk, error)
	// Mount mounts a filesystem read-only; Unmount undoes it.
	Mount   func(dev, dir, fstype string) error
	Unmount func(dir string) error
	// Dir is where seed volumes are mounted while they are read (/run/cairn/seed).
	Dir string
	// Cmdline is the kernel command line's parameters: cairn.platform= names the one source to try
	// ("none": none), ds=nocloud;s=URL is a NoCloud seed over HTTP.
	Cmdline map[string]string
	// MACs maps the machine's MAC addresses (lower case) to its link names, for a network-config that
	// names interfaces by MAC address (nil: none match).
	MACs func() (map[string]string, error)
	Log  *slog.Logger
	// Network sources, replaced in tests (zero: the platforms' own addresses).
	EC2 EC2
	GCE GCE
}

// Answer is what the search found.
type Answer struct {
	Metadata *Metadata // nil: no source answered
	Tried    []string  // "name: outcome" for each source tried
	// Network is the platform's network configuration (NoCloud's network-config), nil when it gives
	// none.
	Network *config.Network
}

// Run searches. An error is a source that is this platform but answered wrongly (too big, unreadable);
// no answer at all is not an error.
func (s Search) Run(ctx context.Context) (Answer, error) {
	choice := s.Cmdline["cairn.platform"]
	if choice == "none" {
		return Answer{Tried: []string{"cairn.platform=none: not looking"}}, nil
	}
	var disks []inventory.Disk
	if s.Disks != nil {
		var err error
		if disks, err = s.Disks(ctx); err != nil {
			s.Log.Warn("platform: cannot list the disks for a seed volume", "error", err)
		}
	}
	var sources []Source
	var mounted []string
	defer func() {
		for _, dir := range mounted {
			if err := s.Unmount(dir); err != nil {
				s.Log.Warn("platform: unmount seed volume", "dir", dir, "error", err)
			}
		}
	}()
	// A seed volume that is there but cannot be mounted ends the search with its error: the machine is
	// on that platform, and a later source must not stand in for it.
	seed := func(name string, labels []string) (string, error) {
		dev, fstype, ok := FindVolume(disks, labels)
		if !ok {
			return "", nil
		}
		dir := filepath.Join(s.Dir, name)
		if err := s.Mount(dev, dir, fstype); err != nil {
			return "", fmt.Errorf("platform %s: the seed volume %s (%s): %w", name, dev, fstype, err)
		}
		mounted = append(mounted, dir)
		return dir, nil
	}
	want := func(name string) bool { return choice == "" || choice == name }
	if want("nocloud") {
		dir, err := seed("nocloud", noCloudLabels)
		if err != nil {
			return Answer{Tried: []string{"nocloud: " + err.Error()}}, err
		}
		sources = append(sources, NoCloudDir{Dir: dir})
		if u := noCloudSeedURL(s.Cmdline["ds"]); u != "" {
			sources = append(sources, NoCloudURL{URL: u})
		}
	}
	// The config drive before the metadata services: a local volume answers at once, while a service
	// that is not there costs its timeouts.
	if want("openstack") {
		dir, err := seed("openstack", configDriveLabs)
		if err != nil {
			return Answer{Tried: []string{"openstack: " + err.Error()}}, err
		}
		sources = append(sources, OpenStack{Dir: dir})
	}
	if want("ec2") {
		sources = append(sources, s.EC2)
	}
	if want("gce") {
		sources = append(sources, s.GCE)
	}
	if len(sources) == 0 {
		return Answer{}, fmt.Errorf("cairn.platform=%s is not nocloud, ec2, gce, openstack or none", choice)
	}
	md, attempts, err := Discover(ctx, sources)
	a := Answer{Metadata: md}
	for _, t := range attempts {
		outcome := "answered"
		if t.Err != nil {
			outcome = t.Err.Error()
		}
		a.Tried = append(a.Tried, t.Source+": "+outcome)
	}
	if errors.Is(err, ErrAbsent) {
		return a, nil
	}
	if err == nil && md != nil && (md.NetworkConfig != nil || md.NetworkData != nil) {
		macs := map[string]string{}
		if s.MACs != nil {
			if macs, err = s.MACs(); err != nil {
				return a, fmt.Errorf("platform %s: list the network interfaces for its network config: %w", md.Platform, err)
			}
		}
		if md.NetworkConfig != nil {
			a.Network, err = ParseNetworkConfig(md.NetworkConfig, macs)
		} else {
			a.Network, err = ParseNetworkData(md.NetworkData, macs)
		}
		if err != nil {
			return a, fmt.Errorf("platform %s: %w", md.Platform, err)
		}
	}
	return a, err
}

// FindVolume finds a filesystem with one of the labels on a whole disk or a partition: its device and
// filesystem type (vfat or iso9660, the two a seed volume is made with).
func FindVolume(disks []inventory.Disk, labels []string) (dev, fstype string, ok bool) {
	match := func(sigs []probe.Signature) (string, bool) {
		for _, sg := range sigs {
			if (sg.Type == probe.TypeVFAT || sg.Type == probe.TypeISO9660) && sg.Problem == "" {
				for _, l := range labels {
					if strings.TrimSpace(sg.Label) == l {
						return sg.Type, true
					}
				}
			}
		}
		return "", false
	}
	for _, d := range disks {
		if t, ok := match(d.Signatures); ok {
			return d.Path, t, true
		}
		for _, p := range d.Partitions {
			if t, ok := match(p.Signatures); ok && p.Path != "" {
				return p.Path, t, true
			}
		}
	}
	return "", "", false
}

// noCloudSeedURL reads cloud-init's ds=nocloud;s=URL (also ds=nocloud-net, and seedfrom= for s=).
func noCloudSeedURL(ds string) string {
	parts := strings.Split(ds, ";")
	if len(parts) < 2 || (parts[0] != "nocloud" && parts[0] != "nocloud-net") {
		return ""
	}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		if (k == "s" || k == "seedfrom") && (strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://")) {
			return v
		}
	}
	return ""
}
