package probe

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	testUUID     = "3f6b2c1a-9d4e-4f5a-8b7c-1d2e3f4a5b6c"
	testDiskGUID = "8d3a1c52-7e41-4b9f-a0c6-5e2f9b7d1a34"
	testPartGUID = "c4b2e8f1-3a6d-4e90-b1f7-2d8c5a9e6b03"
	linuxFSGUID  = "0fc63daf-8483-4772-8e79-3d69d8477de4"
)

// TestProbeRealImages makes each image with the real tool and checks what Probe reports.
func TestProbeRealImages(t *testing.T) {
	tests := []struct {
		name  string
		tools []string
		size  int64
		make  func(t *testing.T, img string)
		want  []Signature
	}{
		{
			name: "xfs", tools: []string{"mkfs.xfs"}, size: 320 << 20,
			make: func(t *testing.T, img string) {
				run(t, "mkfs.xfs", "-q", "-L", "xfsdata", "-m", "uuid="+testUUID, img)
			},
			want: []Signature{{Type: TypeXFS, Kind: KindFilesystem, Label: "xfsdata", UUID: testUUID}},
		},
		{
			name: "ext4", tools: []string{"mkfs.ext4"}, size: 16 << 20,
			make: func(t *testing.T, img string) {
				run(t, "mkfs.ext4", "-q", "-F", "-t", "ext4", "-L", "data", "-U", testUUID, img)
			},
			want: []Signature{{Type: TypeExt4, Kind: KindFilesystem, Label: "data", UUID: testUUID, Offset: 1024}},
		},
		{
			name: "ext3", tools: []string{"mkfs.ext4"}, size: 16 << 20,
			make: func(t *testing.T, img string) {
				run(t, "mkfs.ext4", "-q", "-F", "-t", "ext3", "-L", "old-data", "-U", testUUID, img)
			},
			want: []Signature{{Type: TypeExt3, Kind: KindFilesystem, Label: "old-data", UUID: testUUID, Offset: 1024}},
		},
		{
			name: "ext2", tools: []string{"mkfs.ext4"}, size: 16 << 20,
			make: func(t *testing.T, img string) {
				run(t, "mkfs.ext4", "-q", "-F", "-t", "ext2", "-U", testUUID, img)
			},
			want: []Signature{{Type: TypeExt2, Kind: KindFilesystem, UUID: testUUID, Offset: 1024}},
		},
		{
			name: "vfat FAT12", tools: []string{"mkfs.vfat"}, size: 1 << 20,
			make: func(t *testing.T, img string) {
				run(t, "mkfs.vfat", "-F", "12", "-n", "SMALL", "-i", "1234abcd", img)
			},
			want: []Signature{{Type: TypeVFAT, Kind: KindFilesystem, Version: "FAT12", Label: "SMALL", UUID: "1234-ABCD"}},
		},
		{
			name: "vfat FAT16", tools: []string{"mkfs.vfat"}, size: 32 << 20,
			make: func(t *testing.T, img string) {
				run(t, "mkfs.vfat", "-F", "16", "-n", "EFI", "-i", "0badcafe", img)
			},
			want: []Signature{{Type: TypeVFAT, Kind: KindFilesystem, Version: "FAT16", Label: "EFI", UUID: "0BAD-CAFE"}},
		},
		{
			name: "vfat FAT32 without label", tools: []string{"mkfs.vfat"}, size: 64 << 20,
			make: func(t *testing.T, img string) {
				run(t, "mkfs.vfat", "-F", "32", "-i", "deadbeef", img)
			},
			want: []Signature{{Type: TypeVFAT, Kind: KindFilesystem, Version: "FAT32", UUID: "DEAD-BEEF"}},
		},
		{
			name: "btrfs", tools: []string{"mkfs.btrfs"}, size: 128 << 20,
			make: func(t *testing.T, img string) {
				run(t, "mkfs.btrfs", "-q", "-f", "-L", "pool", "-U", testUUID, img)
			},
			want: []Signature{{Type: TypeBtrfs, Kind: KindFilesystem, Label: "pool", UUID: testUUID, Offset: 64 << 10}},
		},
		{
			name: "swap", tools: []string{"mkswap"}, size: 8 << 20,
			make: func(t *testing.T, img string) {
				run(t, "mkswap", "-L", "swappy", "-U", testUUID, img)
			},
			want: []Signature{{Type: TypeSwap, Kind: KindSwap, Version: "1", Label: "swappy", UUID: testUUID}},
		},
		{
			name: "LUKS1", tools: []string{"cryptsetup"}, size: 8 << 20,
			make: func(t *testing.T, img string) { luksFormat(t, img, "luks1") },
			want: []Signature{{Type: TypeLUKS, Kind: KindCrypto, Version: "1", UUID: testUUID}},
		},
		{
			name: "LUKS2", tools: []string{"cryptsetup"}, size: 32 << 20,
			make: func(t *testing.T, img string) { luksFormat(t, img, "luks2", "--label", "secret") },
			want: []Signature{{Type: TypeLUKS, Kind: KindCrypto, Version: "2", Label: "secret", UUID: testUUID}},
		},
		{
			name: "GPT", tools: []string{"sgdisk"}, size: 8 << 20,
			make: func(t *testing.T, img string) {
				run(t, "sgdisk", "-o", "-U", testDiskGUID, "-n", "1:2048:+1M", "-t", "1:8300", "-c", "1:data part",
					"-u", "1:"+testPartGUID, "-n", "2:4096:+512K", "-t", "2:ef00", img)
			},
			want: []Signature{{Type: TypeGPT, Kind: KindPartitionTable, UUID: testDiskGUID, Offset: 512,
				Partitions: []Partition{
					{Number: 1, Start: 2048 * 512, Size: 1 << 20, Type: linuxFSGUID, UUID: testPartGUID, Name: "data part"},
					{Number: 2, Start: 4096 * 512, Size: 512 << 10, Type: "c12a7328-f81f-11d2-ba4b-00a0c93ec93b", UUID: "*"},
				}}},
		},
		{
			name: "DOS with logical partitions", tools: []string{"sfdisk"}, size: 8 << 20,
			make: func(t *testing.T, img string) {
				runIn(t, "label: dos\nlabel-id: 0x12345678\nstart=2048,size=2048,type=83,bootable\nstart=4096,type=5\nsize=1024,type=83\nsize=1024,type=82\n",
					nil, "sfdisk", "-q", img)
			},
			want: []Signature{{Type: TypeDOS, Kind: KindPartitionTable, UUID: "12345678",
				Partitions: []Partition{
					{Number: 1, Start: 2048 * 512, Size: 2048 * 512, Type: "0x83", UUID: "12345678-01", Bootable: true},
					{Number: 2, Start: 4096 * 512, Size: 12288 * 512, Type: "0x05", UUID: "12345678-02"},
					{Number: 5, Start: 6144 * 512, Size: 1024 * 512, Type: "0x83", UUID: "12345678-05"},
					{Number: 6, Start: 10240 * 512, Size: 1024 * 512, Type: "0x82", UUID: "12345678-06"},
				}}},
		},
		{
			name: "ISO9660", tools: []string{"xorriso"}, size: 0,
			make: func(t *testing.T, img string) {
				run(t, "xorriso", "-as", "mkisofs", "-quiet", "--modification-date=2024010203040500", "-V", "CAIRN_ISO",
					"-o", img, contentDir(t))
			},
			want: []Signature{{Type: TypeISO9660, Kind: KindFilesystem, Label: "CAIRN_ISO", UUID: "2024-01-02-03-04-05-00", Offset: 32768}},
		},
		{
			name: "squashfs", tools: []string{"mksquashfs"}, size: 0,
			make: func(t *testing.T, img string) {
				run(t, "mksquashfs", contentDir(t), img, "-quiet", "-noappend", "-no-progress")
			},
			want: []Signature{{Type: TypeSquashfs, Kind: KindFilesystem, Version: "4.0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needTools(t, tt.tools...)
			img := filepath.Join(t.TempDir(), "image")
			if tt.size > 0 {
				img = sparseFile(t, tt.size)
			}
			tt.make(t, img)
			got := probeFile(t, img)
			// Partition GUIDs the tool picked at random are written "*" in want.
			for i := range tt.want {
				for j, p := range tt.want[i].Partitions {
					if p.UUID == "*" && i < len(got) && j < len(got[i].Partitions) {
						tt.want[i].Partitions[j].UUID = got[i].Partitions[j].UUID
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Probe(%s image) mismatch (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

func luksFormat(t *testing.T, img, typ string, extra ...string) {
	t.Helper()
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("not-a-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"luksFormat", "--batch-mode", "--type", typ, "--uuid", testUUID, "--key-file", key,
		"--pbkdf-force-iterations", "1000"}
	if typ == "luks2" {
		args = append(args, "--pbkdf", "pbkdf2")
	}
	args = append(args, extra...)
	run(t, "cryptsetup", append(args, img)...)
}

func contentDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "hello.txt"), []byte("hello from cairn\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestProbeDamaged checks the copies that survive a partial wipe still count, so a half-wiped disk is never
// taken for blank.
func TestProbeDamaged(t *testing.T) {
	tests := []struct {
		name     string
		tools    []string
		size     int64
		make     func(t *testing.T, img string)
		zeroFrom int64 // then zero these bytes
		zeroLen  int64
		wantType string
		wantOff  func(size int64) int64
	}{
		{
			name: "GPT with primary header zeroed", tools: []string{"sgdisk"}, size: 8 << 20,
			make: func(t *testing.T, img string) {
				run(t, "sgdisk", "-o", "-n", "1:2048:+1M", img)
			},
			zeroFrom: 0, zeroLen: 1 << 20,
			wantType: TypeGPT, wantOff: func(size int64) int64 { return size - 512 },
		},
		{
			name: "LUKS2 with primary header zeroed", tools: []string{"cryptsetup"}, size: 32 << 20,
			make:     func(t *testing.T, img string) { luksFormat(t, img, "luks2") },
			zeroFrom: 0, zeroLen: 4096,
			wantType: TypeLUKS, wantOff: func(int64) int64 { return 0x4000 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needTools(t, tt.tools...)
			img := sparseFile(t, tt.size)
			tt.make(t, img)
			zeroRange(t, img, tt.zeroFrom, tt.zeroLen)
			got := probeFile(t, img)
			if len(got) != 1 || got[0].Type != tt.wantType || got[0].Offset != tt.wantOff(tt.size) || got[0].Problem == "" {
				t.Errorf("Probe(%s) = %v, want one %s at %d with a problem noted", tt.name, got, tt.wantType, tt.wantOff(tt.size))
			}
		})
	}
}

func zeroRange(t *testing.T, img string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		t.Fatal(err)
	}
}

// TestProbeSynthetic covers what needs no tool: blank devices, stray data and tiny devices.
func TestProbeSynthetic(t *testing.T) {
	stray := make([]byte, 8<<20)
	stray[4<<20] = 1 // in the middle: not looked at
	strayEnd := make([]byte, 4<<20)
	strayEnd[len(strayEnd)-100] = 7
	strayStart := make([]byte, 6<<20)
	strayStart[(1<<20)+600] = 0xff // where an old partition's superblock would be
	tests := []struct {
		name string
		data []byte
		want []Signature
	}{
		{name: "empty device", data: nil, want: nil},
		{name: "one zero byte", data: []byte{0}, want: nil},
		{name: "blank 5MiB", data: make([]byte, 5<<20), want: nil},
		{name: "data only in the middle", data: stray, want: nil},
		{name: "stray byte near the end", data: strayEnd,
			want: []Signature{{Type: TypeUnknown, Kind: KindUnknown, Offset: int64(len(strayEnd) - 100), Problem: "non-zero data with no known signature"}}},
		{name: "stray byte near the start", data: strayStart,
			want: []Signature{{Type: TypeUnknown, Kind: KindUnknown, Offset: (1 << 20) + 600, Problem: "non-zero data with no known signature"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Probe(bytes.NewReader(tt.data), int64(len(tt.data)))
			if err != nil {
				t.Fatalf("Probe(%s) error: %v", tt.name, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Probe(%s) mismatch (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

// TestSignaturesSkipsContents: Signatures finds what Probe finds by signature, leaves out data that carries
// none, and reads a blank device's signature places only (a few KiB), not its first and last 2 MiB.
func TestSignaturesSkipsContents(t *testing.T) {
	strayStart := make([]byte, 6<<20)
	strayStart[(1<<20)+600] = 0xff
	if got, err := Signatures(bytes.NewReader(strayStart), int64(len(strayStart))); err != nil || got != nil {
		t.Errorf("Signatures(stray data) = %v, %v; want nothing", got, err)
	}
	if got, _ := Probe(bytes.NewReader(strayStart), int64(len(strayStart))); len(got) != 1 || got[0].Type != TypeUnknown {
		t.Errorf("Probe(stray data) = %v, want the unknown data", got)
	}

	const size = 1 << 30
	for _, c := range []struct {
		name     string
		probe    func(io.ReaderAt, int64) ([]Signature, error)
		min, max int64
	}{
		{"Probe", Probe, 4 << 20, 1 << 62},
		{"Signatures", Signatures, 1, 1 << 20},
	} {
		r := &countingZeros{}
		if got, err := c.probe(r, size); err != nil || got != nil {
			t.Errorf("%s(blank) = %v, %v; want nothing", c.name, got, err)
		}
		if r.n < c.min || r.n > c.max {
			t.Errorf("%s(blank 1 GiB) read %d bytes, want %d to %d", c.name, r.n, c.min, c.max)
		}
	}
}

// countingZeros is a blank device that counts the bytes read from it.
type countingZeros struct{ n int64 }

func (r *countingZeros) ReadAt(b []byte, _ int64) (int, error) {
	clear(b)
	r.n += int64(len(b))
	return len(b), nil
}

// TestProbeReadError: a device that cannot be read is an error, never "blank".
func TestProbeReadError(t *testing.T) {
	_, err := Probe(failingReader{}, 1<<20)
	if err == nil {
		t.Fatal("Probe(unreadable device) = nil error, want an error")
	}
}

type failingReader struct{}

func (failingReader) ReadAt([]byte, int64) (int, error) { return 0, os.ErrPermission }

func TestDescribe(t *testing.T) {
	tests := []struct {
		sigs []Signature
		want string
	}{
		{nil, "nothing (blank)"},
		{[]Signature{{Type: TypeExt4, Kind: KindFilesystem, Label: "data", UUID: testUUID, Offset: 1024}},
			`ext4 filesystem labelled "data", UUID ` + testUUID},
		{[]Signature{{Type: TypeGPT, Kind: KindPartitionTable, Offset: 8 << 20, Problem: "primary GPT header missing"}},
			`GPT partition table, at byte 8388608 (primary GPT header missing)`},
		{[]Signature{{Type: TypeGPT, Kind: KindPartitionTable, Offset: 512, Partitions: []Partition{
			{Number: 1, Name: "cairn-etcd-x", Type: linuxFSGUID, Start: 1 << 20, Size: 1 << 30}}}},
			`GPT partition table, partitions: #1 "cairn-etcd-x" type ` + linuxFSGUID + `, 1GiB at 1MiB`},
		{[]Signature{{Type: TypeLUKS, Kind: KindCrypto, Version: "2"}, {Type: TypeMD, Version: "1.2", Label: "h:0", Offset: 4096}},
			`LUKS2 encrypted volume and MD RAID member (metadata 1.2) labelled "h:0"`},
	}
	for _, tt := range tests {
		if got := Describe(tt.sigs); got != tt.want {
			t.Errorf("Describe(%v) = %q, want %q", tt.sigs, got, tt.want)
		}
	}
}

// TestProbeMDSynthetic places MD superblocks by the layout in the kernel's md_p.h, because mdadm can only
// write them through the kernel's md driver (see TestProbeMDRAID, an integration test).
func TestProbeMDSynthetic(t *testing.T) {
	const size = 1<<20 + 5*512 // not 64 KiB aligned, so the 0.90 rounding is exercised
	setUUID := []byte{0x01, 0x23, 0xab, 0xcd, 0x45, 0x67, 0xef, 0x01, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67}
	tests := []struct {
		version string
		offset  int64
	}{
		{"0.90", (size &^ (64<<10 - 1)) - 64<<10},
		{"1.0", (size - 8192) &^ 4095},
		{"1.1", 0},
		{"1.2", 4096},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			img := make([]byte, size)
			sb := img[tt.offset:]
			le.PutUint32(sb[0:], mdMagic)
			want := Signature{Type: TypeMD, Kind: KindRAID, Version: tt.version, Offset: tt.offset,
				UUID: "0123abcd-4567-ef01-89ab-cdef01234567"}
			if tt.version == "0.90" {
				copy(sb[20:24], setUUID[:4])
				copy(sb[52:64], setUUID[4:])
			} else {
				le.PutUint32(sb[4:], 1)
				copy(sb[16:32], setUUID)
				copy(sb[32:], "node1:0")
				want.Label = "node1:0"
			}
			got, err := Probe(bytes.NewReader(img), size)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]Signature{want}, got); diff != "" {
				t.Errorf("Probe(MD %s) mismatch (-want +got):\n%s", tt.version, diff)
			}
		})
	}
}
