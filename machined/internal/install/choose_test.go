package install

import (
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/machined/internal/disk/gpt"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

func TestChoose(t *testing.T) {
	const gib = 1 << 30
	blank := inventory.Disk{Name: "vdb", Path: "/dev/vdb", Serial: "blank", Size: 4 * gib, SectorSize: 512}
	foreign := inventory.Disk{Name: "vdc", Path: "/dev/vdc", Serial: "foreign", Size: 4 * gib, SectorSize: 512,
		Signatures: []probe.Signature{{Type: "ext4", Label: "data"}}}
	state := inventory.Disk{Name: "vdd", Path: "/dev/vdd", Serial: "state", Size: 4 * gib, SectorSize: 512,
		Signatures: []probe.Signature{{Type: "gpt"}},
		Partitions: []inventory.Partition{{Number: 1, Name: "vdd1", Path: "/dev/vdd1"}}}
	cd := inventory.Disk{Name: "sr0", Path: "/dev/sr0", Serial: "cd", Size: gib, NotCandidate: inventory.NotCandidateBoot}
	unread := inventory.Disk{Name: "vde", Path: "/dev/vde", Serial: "unread", Size: 4 * gib, ProbeError: "I/O error"}
	disks := []inventory.Disk{blank, foreign, state, cd, unread}
	mounts := "/dev/vdd1 /var/lib/cairn/state xfs rw 0 0\n/dev/loop0 / squashfs ro 0 0\n"

	for _, tc := range []struct {
		name      string
		sel       config.Selector
		wipe      bool
		want      string // the disk chosen
		wantErase bool
		err       []string // what the refusal names
	}{
		{name: "blank disk", sel: config.Selector{Serial: "blank"}, want: "/dev/vdb"},
		{name: "blank disk with wipe: nothing to erase", sel: config.Selector{Serial: "blank"}, wipe: true, want: "/dev/vdb"},
		{name: "foreign filesystem refused", sel: config.Selector{Serial: "foreign"}, err: []string{"/dev/vdc", "ext4", "--wipe"}},
		{name: "foreign filesystem with wipe", sel: config.Selector{Serial: "foreign"}, wipe: true, want: "/dev/vdc", wantErase: true},
		{name: "mounted volume refused even with wipe", sel: config.Selector{Serial: "state"}, wipe: true,
			err: []string{"/dev/vdd1 is mounted on /var/lib/cairn/state"}},
		{name: "boot medium never", sel: config.Selector{Serial: "cd"}, wipe: true, err: []string{"the boot medium"}},
		{name: "unreadable disk", sel: config.Selector{Serial: "unread"}, wipe: true, err: []string{"I/O error"}},
		{name: "no selector", err: []string{"--disk", "machine.install.disk"}},
		{name: "no match", sel: config.Selector{Serial: "nope"}, err: []string{"serial", "nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, erase, err := Choose(disks, tc.sel, tc.wipe, mounts)
			if len(tc.err) > 0 {
				if err == nil {
					t.Fatalf("Choose() = %s, want a refusal", d.Path)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Choose() error %q does not name %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Choose() = %v", err)
			}
			if d.Path != tc.want || erase != tc.wantErase {
				t.Errorf("Choose() = %s, erase %v; want %s, erase %v", d.Path, erase, tc.want, tc.wantErase)
			}
		})
	}
}

// The installed layout is cairn.raw's: the ESP from the first MiB, then the two slots, back to back.
func TestLayout(t *testing.T) {
	n := 0
	guids := func() (gpt.GUID, error) { n++; return gpt.GUID{byte(n)}, nil }
	const esp = 128 << 20
	d := inventory.Disk{Path: "/dev/vdb", Size: 2 << 30, SectorSize: 512}
	tab, err := Layout(d, esp, guids)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name        string
		first, last uint64
	}{
		{upgrade.ESPLabel, upgrade.ESPStart / 512, (upgrade.ESPStart+esp)/512 - 1},
		{"CAIRN-PAYLOAD-A", (upgrade.ESPStart + esp) / 512, (upgrade.ESPStart+esp+upgrade.SlotSize)/512 - 1},
		{"CAIRN-PAYLOAD-B", (upgrade.ESPStart + esp + upgrade.SlotSize) / 512, (upgrade.ESPStart+esp+2*upgrade.SlotSize)/512 - 1},
	}
	if len(tab.Partitions) != len(want) {
		t.Fatalf("Layout() has %d partitions, want %d", len(tab.Partitions), len(want))
	}
	for i, w := range want {
		p := tab.Partitions[i]
		if p.Name != w.name || p.FirstLBA != w.first || p.LastLBA != w.last {
			t.Errorf("partition %d = %s %d-%d, want %s %d-%d", i+1, p.Name, p.FirstLBA, p.LastLBA, w.name, w.first, w.last)
		}
	}
	if tab.Partitions[0].Type.String() != espType || tab.Partitions[1].Type.String() != payloadType {
		t.Errorf("partition types %s, %s; want the ESP's and Linux data", tab.Partitions[0].Type, tab.Partitions[1].Type)
	}

	small := inventory.Disk{Path: "/dev/vdc", Size: 1 << 30, SectorSize: 512}
	if _, err := Layout(small, esp, guids); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Errorf("Layout() of a 1 GiB disk = %v, want too small", err)
	}
}
