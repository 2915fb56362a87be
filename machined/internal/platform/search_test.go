package platform

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

// fakeSeeds is a machine whose disks hold seed volumes: mounting one writes its files.
type fakeSeeds struct {
	files   map[string]map[string]string // device → file → content
	mounted []string
	mounts  int
	fail    error // every mount fails with it
}

func (f *fakeSeeds) mount(dev, dir, fstype string) error {
	if f.fail != nil {
		return f.fail
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range f.files[dev] {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	f.mounts++
	f.mounted = append(f.mounted, dir)
	return nil
}

func (f *fakeSeeds) unmount(dir string) error {
	f.mounted = slices.DeleteFunc(f.mounted, func(d string) bool { return d == dir })
	return nil
}

func seedDisk(path, fstype, label string) inventory.Disk {
	return inventory.Disk{Name: filepath.Base(path), Path: path,
		Signatures: []probe.Signature{{Type: fstype, Kind: probe.KindFilesystem, Label: label}}}
}

// absentServer answers nothing a metadata service would (404 everywhere, no flavor header).
func absentServer(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSearch(t *testing.T) {
	disks := []inventory.Disk{
		seedDisk("/dev/vda", probe.TypeXFS, "cairn-state"),
		// A filesystem that is not a seed volume's type does not count, whatever its label.
		seedDisk("/dev/vdb", probe.TypeExt4, "CIDATA"),
		seedDisk("/dev/vdc", probe.TypeVFAT, "CIDATA"),
	}
	files := map[string]map[string]string{"/dev/vdc": {"user-data": userData, "meta-data": "local-hostname: node-7\n"}}
	tests := []struct {
		name       string
		cmdline    map[string]string
		disks      []inventory.Disk
		wantSource string
		wantHost   string
		wantErr    string
		wantMounts int
		mountErr   error
	}{
		{name: "a NoCloud volume", disks: disks, wantSource: "nocloud", wantHost: "node-7", wantMounts: 1},
		{name: "told to look nowhere", cmdline: map[string]string{"cairn.platform": "none"}, disks: disks},
		{name: "told to look elsewhere", cmdline: map[string]string{"cairn.platform": "openstack"}, disks: disks},
		{name: "no seed and no service", disks: disks[:2]},
		{name: "an unknown platform", cmdline: map[string]string{"cairn.platform": "azure"}, wantErr: "cairn.platform=azure"},
		// The machine has a seed: a later source must not stand in for it, and the error names it.
		{name: "a seed that cannot be mounted", disks: disks, mountErr: errors.New("invalid argument"),
			wantErr: "the seed volume /dev/vdc (vfat): invalid argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSeeds{files: files, fail: tc.mountErr}
			base := absentServer(t)
			s := Search{
				Disks: func(context.Context) ([]inventory.Disk, error) { return tc.disks, nil },
				Mount: f.mount, Unmount: f.unmount, Dir: t.TempDir(), Cmdline: tc.cmdline,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				EC2: EC2{Base: base, Client: fastClient()}, GCE: GCE{Base: base, Client: fastClient()},
			}
			a, err := s.Run(t.Context())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Run() error = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run() = %v (tried %q)", err, a.Tried)
			}
			var source, host string
			if a.Metadata != nil {
				source, host = a.Metadata.Platform, a.Metadata.Hostname
				if string(a.Metadata.UserData) != userData {
					t.Errorf("user data = %q, want the seed's", a.Metadata.UserData)
				}
			}
			if source != tc.wantSource || host != tc.wantHost {
				t.Errorf("answer from %q with hostname %q, want %q and %q (tried %q)", source, host, tc.wantSource, tc.wantHost, a.Tried)
			}
			if f.mounts != tc.wantMounts || len(f.mounted) != 0 {
				t.Errorf("%d seed volumes mounted, %d left mounted; want %d mounted, none left", f.mounts, len(f.mounted), tc.wantMounts)
			}
		})
	}
}

func TestFindVolume(t *testing.T) {
	part := inventory.Disk{Path: "/dev/sdb", Partitions: []inventory.Partition{
		{Number: 1, Path: "/dev/sdb1", Signatures: []probe.Signature{{Type: probe.TypeISO9660, Label: "config-2"}}}}}
	damaged := seedDisk("/dev/sdc", probe.TypeVFAT, "cidata")
	damaged.Signatures[0].Problem = "backup boot sector only"
	for _, tc := range []struct {
		name      string
		disks     []inventory.Disk
		labels    []string
		dev, kind string
	}{
		{"a partition", []inventory.Disk{part}, configDriveLabs, "/dev/sdb1", probe.TypeISO9660},
		{"the lower-case label", []inventory.Disk{seedDisk("/dev/sdd", probe.TypeVFAT, "cidata")}, noCloudLabels, "/dev/sdd", probe.TypeVFAT},
		{"a damaged filesystem", []inventory.Disk{damaged}, noCloudLabels, "", ""},
		{"another label", []inventory.Disk{part}, noCloudLabels, "", ""},
	} {
		dev, kind, ok := FindVolume(tc.disks, tc.labels)
		if dev != tc.dev || kind != tc.kind || ok != (tc.dev != "") {
			t.Errorf("%s: FindVolume = %q, %q, %v; want %q, %q", tc.name, dev, kind, ok, tc.dev, tc.kind)
		}
	}
}

func TestNoCloudSeedURL(t *testing.T) {
	for in, want := range map[string]string{
		"nocloud;s=http://10.0.2.2:8000/":            "http://10.0.2.2:8000/",
		"nocloud-net;seedfrom=https://seed.example/": "https://seed.example/",
		"nocloud":                 "",
		"nocloud;s=file:///seed/": "",
		"ec2;s=http://x/":         "",
		"":                        "",
	} {
		if got := noCloudSeedURL(in); got != want {
			t.Errorf("noCloudSeedURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A seed's network-config comes back parsed, its interfaces named by this machine's MAC addresses; one
// Cairn cannot apply ends the search with its error, as malformed user data does.
func TestSearchNetworkConfig(t *testing.T) {
	disks := []inventory.Disk{seedDisk("/dev/vdc", probe.TypeVFAT, "CIDATA")}
	for _, tc := range []struct {
		name, netcfg, wantErr string
		want                  []string // interface names
	}{
		{name: "by MAC address", netcfg: "version: 2\nethernets:\n  id0: {match: {macaddress: '52:54:00:00:00:02'}, addresses: [10.9.0.5/24]}\n", want: []string{"eth1"}},
		{name: "none"},
		{name: "one that cannot be applied", netcfg: "version: 2\nbonds: {}\n", wantErr: "platform nocloud: network-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"user-data": userData, "meta-data": "local-hostname: node-7\n"}
			if tc.netcfg != "" {
				files["network-config"] = tc.netcfg
			}
			f := &fakeSeeds{files: map[string]map[string]string{"/dev/vdc": files}}
			s := Search{
				Disks: func(context.Context) ([]inventory.Disk, error) { return disks, nil },
				Mount: f.mount, Unmount: f.unmount, Dir: t.TempDir(), Cmdline: map[string]string{"cairn.platform": "nocloud"},
				MACs: func() (map[string]string, error) {
					return map[string]string{"52:54:00:00:00:01": "eth0", "52:54:00:00:00:02": "eth1"}, nil
				},
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			a, err := s.Run(t.Context())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Run() = %v, want an error mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if a.Network != nil {
				for _, itf := range a.Network.Interfaces {
					got = append(got, itf.Name)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("network interfaces = %q, want %q", got, tc.want)
			}
		})
	}
}

// An OpenStack config drive's network_data.json comes back parsed the same way.
func TestSearchNetworkData(t *testing.T) {
	disks := []inventory.Disk{seedDisk("/dev/sr0", probe.TypeISO9660, "config-2")}
	f := &fakeSeeds{files: map[string]map[string]string{"/dev/sr0": {
		"openstack/latest/meta_data.json":    `{"hostname": "os-1"}`,
		"openstack/latest/user_data":         userData,
		"openstack/latest/network_data.json": novaNetworkData,
	}}}
	s := Search{
		Disks: func(context.Context) ([]inventory.Disk, error) { return disks, nil },
		Mount: f.mount, Unmount: f.unmount, Dir: t.TempDir(), Cmdline: map[string]string{"cairn.platform": "openstack"},
		MACs: func() (map[string]string, error) {
			return map[string]string{"fa:16:3e:00:00:01": "ens3", "fa:16:3e:00:00:02": "ens4"}, nil
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	a, err := s.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if a.Network == nil || len(a.Network.Interfaces) != 2 || a.Network.Interfaces[0].Name != "ens3" || a.Metadata.Hostname != "os-1" {
		t.Errorf("answer = %+v, network %+v; want os-1 with ens3 and ens4 from network_data.json", a.Metadata, a.Network)
	}
}
