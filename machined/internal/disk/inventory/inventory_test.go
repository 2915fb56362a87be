package inventory

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/disk/gpt"
	"github.com/cairn-os/cairn/machined/internal/disk/internal/fakedev"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fakeOpener serves in-memory devices by path; a path it does not know is an error, like a missing node.
type fakeOpener map[string]*fakedev.Device

func (o fakeOpener) Open(path string) (Device, error) {
	d, ok := o[path]
	if !ok {
		return nil, fmt.Errorf("open %s: %w", path, os.ErrNotExist)
	}
	return d, nil
}

func mustGUID(t *testing.T, s string) gpt.GUID {
	t.Helper()
	g, err := gpt.ParseGUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// fakeDevices are the contents behind testdata/sys: a boot disk with two partitions, a Cairn-style GPT with
// xfs inside, ext4 on a SATA disk, an ISO in the CD drive, and blank disks.
func fakeDevices(t *testing.T, devRoot string) fakeOpener {
	t.Helper()
	dev := func(name string, sectors int64) *fakedev.Device { return fakedev.New(sectors * 512) }
	o := fakeOpener{}
	add := func(name string, d *fakedev.Device) { o[filepath.Join(devRoot, name)] = d }

	vda := dev("vda", 20971520)
	tab := gpt.Table{SectorSize: 512, Size: vda.Size(), DiskGUID: mustGUID(t, "11111111-2222-4333-8444-555555555555"),
		Partitions: []gpt.Partition{
			{Type: mustGUID(t, "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"), GUID: mustGUID(t, "aaaaaaaa-0000-4000-8000-000000000001"), Name: "EFI", FirstLBA: 2048, LastLBA: 206847},
			{Type: mustGUID(t, "0fc63daf-8483-4772-8e79-3d69d8477de4"), GUID: mustGUID(t, "aaaaaaaa-0000-4000-8000-000000000002"), Name: "root", FirstLBA: 206848, LastLBA: 206848 + 20762624 - 1},
		}}
	must(t, tab.Write(vda))
	must(t, fakedev.PutSquashfs(vda, 206848*512))
	add("vda", vda)

	vdc := dev("vdc", 4194304)
	tab = gpt.Table{SectorSize: 512, Size: vdc.Size(), DiskGUID: mustGUID(t, "22222222-2222-4333-8444-555555555555")}
	tab.Partitions = []gpt.Partition{{Type: mustGUID(t, "0fc63daf-8483-4772-8e79-3d69d8477de4"),
		GUID: mustGUID(t, "bbbbbbbb-0000-4000-8000-000000000001"), Name: "cairn-state-c1d2", FirstLBA: 2048, LastLBA: tab.LastUsable()}}
	must(t, tab.Write(vdc))
	must(t, fakedev.PutXFS(vdc, 2048*512, "CAIRN_STATE", [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}))
	add("vdc", vdc)

	sda := dev("sda", 209715200)
	must(t, fakedev.PutExt4(sda, 0, "data", [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}))
	add("sda", sda)

	sr0 := dev("sr0", 614400)
	must(t, fakedev.PutISO9660(sr0, "CAIRN"))
	add("sr0", sr0)

	add("vdb", dev("vdb", 41943040))
	add("vdd", dev("vdd", 4194304))
	add("sdb", dev("sdb", 209715200))
	add("nvme0n1", dev("nvme0n1", 1953525168))
	add("loop0", dev("loop0", 204800))
	return o
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testScanner(t *testing.T) Scanner {
	t.Helper()
	devRoot := filepath.Join("testdata", "dev")
	return Scanner{SysRoot: filepath.Join("testdata", "sys"), DevRoot: devRoot, Opener: fakeDevices(t, devRoot),
		Boot: []string{"vda2"}}
}

// TestScanGolden compares the whole inventory of the fake tree with testdata/inventory.golden.json.
func TestScanGolden(t *testing.T) {
	disks, err := testScanner(t).Scan(context.Background())
	if err != nil {
		t.Fatalf("Scan() error: %v", err)
	}
	got, err := json.MarshalIndent(disks, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "inventory.golden.json")
	if *update {
		must(t, os.WriteFile(golden, append(got, '\n'), 0o644))
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)+"\n"); diff != "" {
		t.Errorf("Scan() differs from %s (-want +got):\n%s", golden, diff)
	}
}

// TestScanFacts spells out the facts the golden file holds that matter most, so a careless -update cannot
// hide a regression in them.
func TestScanFacts(t *testing.T) {
	disks, err := testScanner(t).Scan(context.Background())
	if err != nil {
		t.Fatalf("Scan() error: %v", err)
	}
	byName := map[string]Disk{}
	var names []string
	for _, d := range disks {
		byName[d.Name] = d
		names = append(names, d.Name)
	}
	wantNames := []string{"loop0", "nvme0n1", "sda", "sdb", "sr0", "vda", "vdb", "vdc", "vdd"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("Scan() disk names (-want +got):\n%s", diff)
	}
	dev := filepath.Join("testdata", "dev")
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"vda is the boot medium", byName["vda"].NotCandidate, NotCandidateBoot},
		{"sr0 is read-only", byName["sr0"].NotCandidate, "read-only"},
		{"vdd is held", byName["vdd"].NotCandidate, "in use by dm-0"},
		{"vdb is a candidate", byName["vdb"].NotCandidate, ""},
		{"vdb size", byName["vdb"].Size, uint64(20 << 30)},
		{"vdb serial", byName["vdb"].Serial, "etcd-disk"},
		{"vdb by-id", byName["vdb"].ByID, []string{dev + "/disk/by-id/virtio-etcd-disk"}},
		{"vdb blank", len(byName["vdb"].Signatures), 0},
		{"vdc serial with space", byName["vdc"].ByID, []string{dev + "/disk/by-id/virtio-state_disk"}},
		{"vdc partition label", byName["vdc"].Partitions[0].Label, "cairn-state-c1d2"},
		{"vdc partition path", byName["vdc"].Partitions[0].Path, dev + "/vdc1"},
		{"vdc partition fs label", byName["vdc"].Partitions[0].Signatures[0].Label, "CAIRN_STATE"},
		{"vdc not rotational", byName["vdc"].Rotational, false},
		{"sda serial from VPD page 0x80", byName["sda"].Serial, "QM00001"},
		{"sda wwn", byName["sda"].WWN, "naa.5000c5001234abcd"},
		{"sda model", byName["sda"].Model, "QEMU HARDDISK"},
		{"sda ext4 label", byName["sda"].Signatures[0].Label, "data"},
		{"sdb serial from the ata- link", byName["sdb"].Serial, "QM00002"},
		{"nvme by-id", byName["nvme0n1"].ByID, []string{dev + "/disk/by-id/nvme-Samsung_SSD_980_1TB_S64ANS0T123456"}},
		{"nvme wwn", byName["nvme0n1"].WWN, "eui.0025385b71b2c3d4"},
		{"loop0 has no serial", byName["loop0"].Serial, ""},
		{"loop0 size from sysfs", byName["loop0"].Size, uint64(100 << 20)},
		{"sr0 ISO label", byName["sr0"].Signatures[0].Label, "CAIRN"},
		{"vda2 squashfs", byName["vda"].Partitions[1].Signatures[0].Type, "squashfs"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("Scan(): %s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestScanBootBy(t *testing.T) {
	for _, boot := range []string{"vdb", "testdata/dev/vdb", "254:16"} {
		s := testScanner(t)
		s.Boot = []string{boot}
		d, err := s.Disk(context.Background(), "vdb")
		if err != nil {
			t.Fatal(err)
		}
		if d.NotCandidate != NotCandidateBoot {
			t.Errorf("Disk(vdb) with Boot=%q: NotCandidate = %q, want %q", boot, d.NotCandidate, NotCandidateBoot)
		}
	}
}

// TestScanUnreadable: a disk whose contents cannot be read carries the error and no signatures.
func TestScanUnreadable(t *testing.T) {
	s := testScanner(t)
	delete(s.Opener.(fakeOpener), filepath.Join(s.DevRoot, "vdb"))
	d, err := s.Disk(context.Background(), "vdb")
	if err != nil {
		t.Fatal(err)
	}
	if d.ProbeError == "" {
		t.Errorf("Disk(vdb) with no device node: ProbeError empty, want the open error")
	}
}

func TestScanMissingSysfs(t *testing.T) {
	_, err := Scanner{SysRoot: t.TempDir(), DevRoot: "/dev"}.Scan(context.Background())
	if err == nil {
		t.Errorf("Scan() of an empty sysfs = nil error, want one naming the block directory")
	}
}

// A partition held by Cairn's own opened volume (an encrypted STATE, /dev/mapper/cairn-state) is still
// Cairn's to plan; one held by any other device-mapper target or an MD array is in use.
func TestOwnHolders(t *testing.T) {
	sys := t.TempDir()
	for name, dm := range map[string]string{"dm-0": "cairn-state", "dm-1": "vg0-data"} {
		if err := os.MkdirAll(filepath.Join(sys, "block", name, "dm"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, "block", name, "dm", "name"), []byte(dm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := Scanner{SysRoot: sys}
	for _, tc := range []struct {
		holders []string
		want    string
	}{
		{[]string{"dm-0"}, ""},
		{[]string{"dm-1"}, "in use (partition vdb1 by dm-1)"},
		{[]string{"md0"}, "in use (partition vdb1 by md0)"},
	} {
		d := Disk{Name: "vdb", Size: 1 << 30, Partitions: []Partition{{Name: "vdb1", Holders: tc.holders}}}
		if got := s.notCandidate(d); got != tc.want {
			t.Errorf("notCandidate(partition held by %v) = %q, want %q", tc.holders, got, tc.want)
		}
	}
}

// TestScanSignaturesOnly: the signatures-only scan sees every disk, partition table and label the full scan
// sees; only data without a signature goes unreported, which the full scan keeps for deciding what may be
// formatted.
func TestScanSignaturesOnly(t *testing.T) {
	full := testScanner(t)
	stray := full.Opener.(fakeOpener)[filepath.Join(full.DevRoot, "vdb")]
	if _, err := stray.WriteAt([]byte{0xff}, 4096); err != nil {
		t.Fatal(err)
	}
	quick := full
	quick.SignaturesOnly = true
	want, err := full.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := quick.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if want[i].Name == "vdb" {
			if len(want[i].Signatures) != 1 || len(got[i].Signatures) != 0 {
				t.Errorf("vdb with stray data: full scan %v, signatures-only %v; want unknown data, then nothing", want[i].Signatures, got[i].Signatures)
			}
			want[i].Signatures, got[i].Signatures = nil, nil
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("signatures-only scan differs from the full one (-full +signatures-only):\n%s", diff)
	}
}
