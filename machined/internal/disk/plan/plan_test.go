package plan

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const cluster = "k7f3q9x2m4c8"

func disk(name, serial string, sigs ...probe.Signature) inventory.Disk {
	return inventory.Disk{Name: name, Path: "/dev/" + name, Size: 20 << 30, Serial: serial, Signatures: sigs}
}

// cairnDisk is a disk as Cairn leaves it: a GPT with one labelled partition and, unless fstype is "", the
// volume's filesystem inside.
func cairnDisk(name, serial string, v Volume, clusterID, fstype, fsLabel string) inventory.Disk {
	d := disk(name, serial, probe.Signature{Type: probe.TypeGPT, Kind: probe.KindPartitionTable, Offset: 512,
		Partitions: []probe.Partition{{Number: 1, Start: 1 << 20, Size: 19 << 30, Type: v.PartitionType(), Name: PartitionName(v, clusterID)}}})
	p := inventory.Partition{Number: 1, Name: name + "1", Path: "/dev/" + name + "1", Start: 1 << 20, Size: 19 << 30,
		Type: v.PartitionType(), Label: PartitionName(v, clusterID)}
	if fstype != "" {
		p.Signatures = []probe.Signature{{Type: fstype, Kind: probe.KindFilesystem, Label: fsLabel, UUID: "0b5c1d2e-0000-4000-8000-000000000001"}}
	}
	d.Partitions = []inventory.Partition{p}
	return d
}

var ext4Data = probe.Signature{Type: probe.TypeExt4, Kind: probe.KindFilesystem, Label: "data", UUID: "3f6b2c1a-9d4e-4f5a-8b7c-1d2e3f4a5b6c", Offset: 1024}

func sel(serial string) config.DiskSpec {
	return config.DiskSpec{Selector: config.Selector{Serial: serial}}
}

func cp(state, eph config.DiskSpec, etcd *config.DiskSpec) config.Disks {
	return config.Disks{State: state, Ephemeral: eph, Etcd: etcd}
}

func ptr(s config.DiskSpec) *config.DiskSpec { return &s }

func wipe(s config.DiskSpec) config.DiskSpec { s.Wipe = true; return s }

// stepWant is what a test expects of one volume's step.
type stepWant struct {
	action  Action
	errs    []string // substrings of the step's error
	encrypt bool
}

func encrypted(s config.DiskSpec) config.DiskSpec { s.Encryption = config.EncryptionTPM; return s }

// luksDisk is an encrypted STATE as Cairn leaves it: its partition holds a LUKS2 header with the label.
func luksDisk(name, serial, clusterID, label string) inventory.Disk {
	d := cairnDisk(name, serial, State, clusterID, probe.TypeLUKS, label)
	d.Partitions[0].Signatures[0].Kind, d.Partitions[0].Signatures[0].Version = probe.KindCrypto, "2"
	return d
}

func TestMake(t *testing.T) {
	blank := []inventory.Disk{disk("vdb", "state"), disk("vdc", "eph"), disk("vdd", "etcd")}
	tests := []struct {
		name  string
		disks []inventory.Disk
		cfg   config.Disks
		typ   string
		noTPM bool
		want  map[Volume]stepWant
	}{
		{
			name: "encrypted STATE on a blank disk", disks: blank, typ: config.TypeWorker,
			cfg:  cp(encrypted(sel("state")), sel("eph"), nil),
			want: map[Volume]stepWant{State: {action: Format, encrypt: true}, Ephemeral: {action: Format}},
		},
		{
			name: "encrypted STATE without a TPM is refused", disks: blank, typ: config.TypeWorker, noTPM: true,
			cfg:  cp(encrypted(sel("state")), sel("eph"), nil),
			want: map[Volume]stepWant{State: {action: Refuse, errs: []string{"machine.disks.state.encryption", "no TPM 2.0"}}, Ephemeral: {action: Format}},
		},
		{
			name: "own LUKS2 STATE is kept and opened, whatever the config says", typ: config.TypeWorker, noTPM: true,
			disks: []inventory.Disk{luksDisk("vdb", "state", cluster, "CAIRN_STATE"), disk("vdc", "eph")},
			cfg:   cp(sel("state"), sel("eph"), nil),
			want:  map[Volume]stepWant{State: {action: Keep, encrypt: true}, Ephemeral: {action: Format}},
		},
		{
			name: "own unencrypted STATE stays unencrypted", typ: config.TypeWorker,
			disks: []inventory.Disk{cairnDisk("vdb", "state", State, cluster, "xfs", "CAIRN_STATE"), disk("vdc", "eph")},
			cfg:   cp(encrypted(sel("state")), sel("eph"), nil),
			want:  map[Volume]stepWant{State: {action: Keep}, Ephemeral: {action: Format}},
		},
		{
			name: "a LUKS2 volume labelled otherwise is someone else's", typ: config.TypeWorker,
			disks: []inventory.Disk{luksDisk("vdb", "state", cluster, "secrets"), disk("vdc", "eph")},
			cfg:   cp(encrypted(sel("state")), sel("eph"), nil),
			want:  map[Volume]stepWant{State: {action: Refuse, errs: []string{"LUKS2 encrypted volume", "machine.disks.state.wipe: true"}}, Ephemeral: {action: Format}},
		},
		{
			name: "blank disks are formatted", disks: blank, typ: config.TypeControlPlane,
			cfg:  cp(sel("state"), sel("eph"), ptr(sel("etcd"))),
			want: map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Format}, Etcd: {action: Format}},
		},
		{
			name: "own labels are kept", typ: config.TypeControlPlane,
			disks: []inventory.Disk{
				cairnDisk("vdb", "state", State, cluster, "xfs", "CAIRN_STATE"),
				cairnDisk("vdc", "eph", Ephemeral, cluster, "ext4", "CAIRN_EPHEM"),
				cairnDisk("vdd", "etcd", Etcd, cluster, "xfs", "CAIRN_ETCD"),
			},
			cfg:  cp(sel("state"), sel("eph"), ptr(sel("etcd"))),
			want: map[Volume]stepWant{State: {action: Keep}, Ephemeral: {action: Keep}, Etcd: {action: Keep}},
		},
		{
			name: "own label is kept even with wipe: true", typ: config.TypeWorker,
			disks: []inventory.Disk{cairnDisk("vdb", "state", State, cluster, "xfs", "CAIRN_STATE"), disk("vdc", "eph")},
			cfg:   cp(wipe(sel("state")), config.DiskSpec{Tmpfs: true}, nil),
			want:  map[Volume]stepWant{State: {action: Keep}, Ephemeral: {action: Tmpfs}},
		},
		{
			name: "own partition without filesystem resumes the format", typ: config.TypeWorker,
			disks: []inventory.Disk{cairnDisk("vdb", "state", State, cluster, "", ""), disk("vdc", "eph")},
			cfg:   cp(sel("state"), sel("eph"), nil),
			want:  map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Format}},
		},
		{
			name: "foreign ext4 is refused, naming device, contents and the wipe field", typ: config.TypeControlPlane,
			disks: []inventory.Disk{disk("vdb", "state"), disk("vdc", "eph"), disk("vdd", "etcd", ext4Data)},
			cfg:   cp(sel("state"), sel("eph"), ptr(sel("etcd"))),
			want: map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Format}, Etcd: {action: Refuse, errs: []string{
				"machine.disks.etcd: /dev/vdd (20GiB, serial \"etcd\")", `ext4 filesystem labelled "data", UUID 3f6b2c1a-9d4e-4f5a-8b7c-1d2e3f4a5b6c`,
				"set machine.disks.etcd.wipe: true"}}},
		},
		{
			name: "foreign data with wipe: true is wiped", typ: config.TypeControlPlane,
			disks: []inventory.Disk{disk("vdb", "state"), disk("vdc", "eph"), disk("vdd", "etcd", ext4Data)},
			cfg:   cp(sel("state"), sel("eph"), ptr(wipe(sel("etcd")))),
			want:  map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Format}, Etcd: {action: WipeAndFormat}},
		},
		{
			name: "wipe on another disk does not allow this one", typ: config.TypeControlPlane,
			disks: []inventory.Disk{disk("vdb", "state"), disk("vdc", "eph", ext4Data), disk("vdd", "etcd", ext4Data)},
			cfg:   cp(sel("state"), sel("eph"), ptr(wipe(sel("etcd")))),
			want: map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Refuse, errs: []string{"machine.disks.ephemeral.wipe: true"}},
				Etcd: {action: WipeAndFormat}},
		},
		{
			name: "another cluster's label is refused naming that cluster", typ: config.TypeControlPlane,
			disks: []inventory.Disk{disk("vdb", "state"), disk("vdc", "eph"), cairnDisk("vdd", "etcd", Etcd, "othercluster01", "xfs", "CAIRN_ETCD")},
			cfg:   cp(sel("state"), sel("eph"), ptr(sel("etcd"))),
			want: map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Format}, Etcd: {action: Refuse, errs: []string{
				`ETCD volume of another Cairn cluster (cluster ID "othercluster01")`, "machine.disks.etcd.wipe: true"}}},
		},
		{
			name: "another cluster's label with wipe: true is wiped", typ: config.TypeWorker,
			disks: []inventory.Disk{cairnDisk("vdb", "state", State, "othercluster01", "xfs", "CAIRN_STATE"), disk("vdc", "eph")},
			cfg:   cp(wipe(sel("state")), sel("eph"), nil),
			want:  map[Volume]stepWant{State: {action: WipeAndFormat}, Ephemeral: {action: Format}},
		},
		{
			name: "this cluster's label for another volume is refused", typ: config.TypeWorker,
			disks: []inventory.Disk{cairnDisk("vdb", "state", Etcd, cluster, "xfs", "CAIRN_ETCD"), disk("vdc", "eph")},
			cfg:   cp(sel("state"), sel("eph"), nil),
			want:  map[Volume]stepWant{State: {action: Refuse, errs: []string{"holds this cluster's ETCD volume, not STATE"}}, Ephemeral: {action: Format}},
		},
		{
			name: "own partition with a foreign filesystem inside is refused", typ: config.TypeWorker,
			disks: []inventory.Disk{cairnDisk("vdb", "state", State, cluster, "ext4", "data"), disk("vdc", "eph")},
			cfg:   cp(sel("state"), sel("eph"), nil),
			want:  map[Volume]stepWant{State: {action: Refuse, errs: []string{`instead of Cairn's filesystem`}}, Ephemeral: {action: Format}},
		},
		{
			name: "a second partition makes the disk foreign", typ: config.TypeWorker,
			disks: func() []inventory.Disk {
				d := cairnDisk("vdb", "state", State, cluster, "xfs", "CAIRN_STATE")
				d.Partitions = append(d.Partitions, inventory.Partition{Number: 2})
				d.Signatures[0].Partitions = append(d.Signatures[0].Partitions, probe.Partition{Number: 2})
				return []inventory.Disk{d, disk("vdc", "eph")}
			}(),
			cfg:  cp(sel("state"), sel("eph"), nil),
			want: map[Volume]stepWant{State: {action: Refuse, errs: []string{"GPT partition table"}}, Ephemeral: {action: Format}},
		},
		{
			name: "a damaged GPT is never ours", typ: config.TypeWorker,
			disks: func() []inventory.Disk {
				d := cairnDisk("vdb", "state", State, cluster, "xfs", "CAIRN_STATE")
				d.Signatures[0].Problem = "primary GPT header missing"
				return []inventory.Disk{d, disk("vdc", "eph")}
			}(),
			cfg:  cp(sel("state"), sel("eph"), nil),
			want: map[Volume]stepWant{State: {action: Refuse, errs: []string{"primary GPT header missing"}}, Ephemeral: {action: Format}},
		},
		{
			name: "unreadable disk is refused", typ: config.TypeWorker,
			disks: func() []inventory.Disk {
				d := disk("vdb", "state")
				d.ProbeError = "read /dev/vdb: input/output error"
				return []inventory.Disk{d, disk("vdc", "eph")}
			}(),
			cfg:  cp(sel("state"), sel("eph"), nil),
			want: map[Volume]stepWant{State: {action: Refuse, errs: []string{"could not read /dev/vdb", "input/output error"}}, Ephemeral: {action: Format}},
		},
		{
			name: "two volumes on one disk are both refused", disks: blank, typ: config.TypeWorker,
			cfg: cp(sel("state"), sel("state"), nil),
			want: map[Volume]stepWant{
				State:     {action: Refuse, errs: []string{"machine.disks.state and machine.disks.ephemeral select the same disk /dev/vdb"}},
				Ephemeral: {action: Refuse, errs: []string{"machine.disks.state and machine.disks.ephemeral select the same disk /dev/vdb"}}},
		},
		{
			name: "control plane without etcd", disks: blank, typ: config.TypeControlPlane,
			cfg:  cp(sel("state"), sel("eph"), nil),
			want: map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Format}, Etcd: {action: Refuse, errs: []string{"machine.disks.etcd is missing"}}},
		},
		{
			name: "worker with etcd", disks: blank, typ: config.TypeWorker,
			cfg:  cp(sel("state"), sel("eph"), ptr(sel("etcd"))),
			want: map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Format}, Etcd: {action: Refuse, errs: []string{"workers run no etcd"}}},
		},
		{
			name: "no selector and not tmpfs", disks: blank, typ: config.TypeWorker,
			cfg:  cp(sel("state"), config.DiskSpec{}, nil),
			want: map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Refuse, errs: []string{"machine.disks.ephemeral selects no disk", "tmpfs"}}},
		},
		{
			name: "selector that matches nothing", disks: blank, typ: config.TypeWorker,
			cfg: cp(sel("state"), sel("missing"), nil),
			want: map[Volume]stepWant{State: {action: Format}, Ephemeral: {action: Refuse, errs: []string{
				`machine.disks.ephemeral: no disk matches {serial: "missing"}`, "/dev/vdc"}}},
		},
		{
			name: "tmpfs volumes", disks: nil, typ: config.TypeControlPlane,
			cfg:  cp(config.DiskSpec{Tmpfs: true}, config.DiskSpec{Tmpfs: true}, &config.DiskSpec{Tmpfs: true}),
			want: map[Volume]stepWant{State: {action: Tmpfs}, Ephemeral: {action: Tmpfs}, Etcd: {action: Tmpfs}},
		},
		{
			name: "unknown filesystem", disks: blank, typ: config.TypeWorker,
			cfg:  cp(config.DiskSpec{Selector: config.Selector{Serial: "state"}, Filesystem: "btrfs"}, sel("eph"), nil),
			want: map[Volume]stepWant{State: {action: Refuse, errs: []string{`machine.disks.state.filesystem "btrfs"`}}, Ephemeral: {action: Format}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Make(Input{Disks: tt.disks, Config: tt.cfg, MachineType: tt.typ, ClusterID: cluster, TPM: !tt.noTPM})
			got := map[Volume]Action{}
			for _, s := range p.Steps {
				got[s.Volume] = s.Action
				w := tt.want[s.Volume]
				if s.Encrypt != w.encrypt {
					t.Errorf("Make() %s: Encrypt = %v, want %v (%s)", s.Volume, s.Encrypt, w.encrypt, s.Reason)
				}
				for _, e := range w.errs {
					if s.Err() == nil || !strings.Contains(s.Err().Error(), e) {
						t.Errorf("Make() %s error = %v, want it to contain %q", s.Volume, s.Err(), e)
					}
				}
				if (s.Action == Refuse) != (s.Err() != nil) {
					t.Errorf("Make() %s: action %s with error %v", s.Volume, s.Action, s.Err())
				}
			}
			wantActions := map[Volume]Action{}
			for v, w := range tt.want {
				wantActions[v] = w.action
			}
			if diff := cmp.Diff(wantActions, got); diff != "" {
				t.Errorf("Make() actions (-want +got):\n%s\n%s", diff, p)
			}
			if refused := len(tt.want) > 0 && hasRefusal(tt.want); refused != (p.Err() != nil) {
				t.Errorf("Make().Err() = %v, want an error: %v", p.Err(), refused)
			}
		})
	}
}

func hasRefusal(m map[Volume]stepWant) bool {
	for _, w := range m {
		if w.action == Refuse {
			return true
		}
	}
	return false
}

func TestStepOrder(t *testing.T) {
	p := Make(Input{Disks: []inventory.Disk{disk("vdb", "state"), disk("vdc", "eph")}, MachineType: config.TypeWorker,
		ClusterID: cluster, Config: cp(sel("state"), sel("eph"), ptr(sel("etcd")))})
	var got []Volume
	for _, s := range p.Steps {
		got = append(got, s.Volume)
	}
	if diff := cmp.Diff([]Volume{State, Ephemeral, Etcd}, got); diff != "" {
		t.Errorf("Make() step order (-want +got):\n%s", diff)
	}
}

func TestLabel(t *testing.T) {
	tests := []struct {
		v       Volume
		cluster string
		name    string
	}{
		{Etcd, "abc", "cairn-etcd-abc"},
		{Ephemeral, "0123456789abcdef0123", "cairn-ephemeral-0123456789abcdef0123"},
		{Ephemeral, "0123456789abcdef0123456789", "cairn-ephemeral-0123456789abcdef0123"},
		{State, "0123456789abcdef0123456789", "cairn-state-0123456789abcdef01234567"},
	}
	for _, tt := range tests {
		name := PartitionName(tt.v, tt.cluster)
		if name != tt.name {
			t.Errorf("PartitionName(%s, %q) = %q, want %q", tt.v, tt.cluster, name, tt.name)
		}
		l, ok := ParseLabel(inventory.Partition{Type: tt.v.PartitionType(), Label: name})
		if !ok || l.Volume != tt.v || !l.IsCluster(tt.cluster) || l.IsCluster(tt.cluster+"x") && len(name) < 36 {
			t.Errorf("ParseLabel(%q) = %+v, %v; want volume %s of cluster %q", name, l, ok, tt.v, tt.cluster)
		}
		if l.IsCluster("other") {
			t.Errorf("ParseLabel(%q).IsCluster(other) = true, want false", name)
		}
	}
	if _, ok := ParseLabel(inventory.Partition{Type: "0fc63daf-8483-4772-8e79-3d69d8477de4", Label: "cairn-etcd-abc"}); ok {
		t.Errorf("ParseLabel(Linux type, cairn name) = ok, want not Cairn's: the type GUID decides")
	}
	if l, ok := ParseLabel(inventory.Partition{Type: Etcd.PartitionType(), Label: "data"}); !ok || l.Problem == "" {
		t.Errorf("ParseLabel(Cairn type, foreign name) = %+v, %v; want Cairn's with a problem", l, ok)
	}
}

// TestRenderGolden pins the operator-facing text of a plan with every action.
func TestRenderGolden(t *testing.T) {
	p := Make(Input{MachineType: config.TypeControlPlane, ClusterID: cluster,
		Disks:  []inventory.Disk{cairnDisk("vdb", "state", State, cluster, "xfs", "CAIRN_STATE"), disk("vdd", "etcd", ext4Data)},
		Config: cp(sel("state"), config.DiskSpec{Tmpfs: true}, ptr(sel("etcd")))})
	p2 := Make(Input{MachineType: config.TypeWorker, ClusterID: cluster,
		Disks:  []inventory.Disk{disk("vdb", "state"), disk("vdc", "eph", ext4Data)},
		Config: cp(sel("state"), wipe(sel("eph")), nil)})
	got := p.String() + "\n" + p2.String() + "\nerror:\n" + p.Err().Error() + "\n"
	golden := filepath.Join("testdata", "plan.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Plan.String() differs from %s (-want +got):\n%s", golden, diff)
	}
}

// TestRefusalSurvivesJSON: a plan sent over the API and decoded must still refuse.
func TestRefusalSurvivesJSON(t *testing.T) {
	p := Make(Input{MachineType: config.TypeWorker, ClusterID: cluster,
		Disks: []inventory.Disk{disk("vdb", "state", ext4Data)}, Config: cp(sel("state"), config.DiskSpec{Tmpfs: true}, nil)})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var decoded Plan
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	if decoded.Err() == nil || decoded.Err().Error() != p.Err().Error() {
		t.Errorf("decoded Plan.Err() = %v, want %v", decoded.Err(), p.Err())
	}
}
