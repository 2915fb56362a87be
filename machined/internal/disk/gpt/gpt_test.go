package gpt

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

const linuxFS = "0fc63daf-8483-4772-8e79-3d69d8477de4"

func mustGUID(t *testing.T, s string) GUID {
	t.Helper()
	g, err := ParseGUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGUIDRoundTrip(t *testing.T) {
	for _, s := range []string{linuxFS, "c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "00000000-0000-0000-0000-000000000000"} {
		g := mustGUID(t, s)
		if got := g.String(); got != s {
			t.Errorf("ParseGUID(%q).String() = %q, want %q", s, got, s)
		}
	}
	for _, bad := range []string{"", "0fc63daf84834772", "0fc63daf-8483-4772-8e79-3d69d8477de", "zzc63daf-8483-4772-8e79-3d69d8477de4"} {
		if _, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) = nil error, want an error", bad)
		}
	}
	a, _ := NewGUID()
	b, _ := NewGUID()
	if a == b || a.String()[14] != '4' {
		t.Errorf("NewGUID() = %s, %s: want two different version-4 GUIDs", a, b)
	}
}

// TestWriteReadBack writes a table, checks it with sgdisk (an independent reader) when present, and reads
// it back with the prober.
func TestWriteReadBack(t *testing.T) {
	for _, ss := range []int64{512, 4096} {
		t.Run(strings.TrimSpace(string(rune('0'+ss/512))), func(t *testing.T) {
			const size = 64 << 20
			img := filepath.Join(t.TempDir(), "disk")
			f, err := os.Create(img)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
			tab := Table{SectorSize: ss, Size: size, DiskGUID: mustGUID(t, "8d3a1c52-7e41-4b9f-a0c6-5e2f9b7d1a34")}
			tab.Partitions = []Partition{{
				Type: mustGUID(t, linuxFS), GUID: mustGUID(t, "c4b2e8f1-3a6d-4e90-b1f7-2d8c5a9e6b03"),
				Name: "cairn-etcd-ü", FirstLBA: tab.AlignedStart(), LastLBA: tab.LastUsable(),
			}}
			if err := tab.Write(f); err != nil {
				t.Fatalf("Write() error: %v", err)
			}
			if ss == 512 {
				if _, err := exec.LookPath("sgdisk"); err == nil {
					out, err := exec.Command("sgdisk", "-v", img).CombinedOutput()
					if err != nil || !strings.Contains(string(out), "No problems found") {
						t.Errorf("sgdisk -v on the written table: %v\n%s", err, out)
					}
				}
			}
			sigs, err := probe.Probe(f, size)
			if err != nil {
				t.Fatal(err)
			}
			want := []probe.Signature{{Type: probe.TypeGPT, Kind: probe.KindPartitionTable, Offset: ss,
				UUID: "8d3a1c52-7e41-4b9f-a0c6-5e2f9b7d1a34", Partitions: []probe.Partition{{
					Number: 1, Start: 1 << 20, Size: int64(tab.LastUsable()+1)*ss - 1<<20, Type: linuxFS,
					UUID: "c4b2e8f1-3a6d-4e90-b1f7-2d8c5a9e6b03", Name: "cairn-etcd-ü"}}}}
			if diff := cmp.Diff(want, sigs); diff != "" {
				t.Errorf("Probe(written table, sector size %d) mismatch (-want +got):\n%s", ss, diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Table{SectorSize: 512, Size: 8 << 20}
	tests := []struct {
		name string
		tab  Table
		want string
	}{
		{"bad sector size", Table{SectorSize: 1024, Size: 8 << 20}, "sector size"},
		{"tiny device", Table{SectorSize: 512, Size: 64 << 10}, "too small"},
		{"partition past the end", Table{SectorSize: 512, Size: 8 << 20, Partitions: []Partition{{FirstLBA: 2048, LastLBA: ok.LastUsable() + 1}}}, "outside"},
		{"name too long", Table{SectorSize: 512, Size: 8 << 20, Partitions: []Partition{{FirstLBA: 2048, LastLBA: 4000, Name: strings.Repeat("x", 37)}}}, "at most 36"},
	}
	for _, tt := range tests {
		err := tt.tab.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%s) = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestFitName(t *testing.T) {
	tests := []struct {
		prefix, suffix string
		want           string
		cut            bool
	}{
		{"cairn-etcd-", "abc", "cairn-etcd-abc", false},
		{"cairn-ephemeral-", "0123456789abcdef0123", "cairn-ephemeral-0123456789abcdef0123", false},
		{"cairn-ephemeral-", "0123456789abcdef01234", "cairn-ephemeral-0123456789abcdef0123", true},
		// A non-BMP rune takes two units and is dropped whole rather than split.
		{"cairn-ephemeral-", "0123456789abcdef012😀", "cairn-ephemeral-0123456789abcdef012", true},
	}
	for _, tt := range tests {
		got, cut, err := FitName(tt.prefix, tt.suffix)
		if err != nil || got != tt.want || cut != tt.cut {
			t.Errorf("FitName(%q, %q) = %q, %v, %v; want %q, %v", tt.prefix, tt.suffix, got, cut, err, tt.want, tt.cut)
		}
	}
}
