package kernel

import (
	"bytes"
	"encoding/binary"
	"flag"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "regenerate testdata/ with the xz tool")

// codeLike returns deterministic bytes with many near CALL/JMP instructions (E8/E9 followed by a small
// positive or negative displacement), runs of them, and plain data: what the BCJ filter rewrites.
func codeLike() []byte {
	r := rand.New(rand.NewSource(1))
	var b bytes.Buffer
	for b.Len() < 64*1024 {
		switch r.Intn(6) {
		case 0, 1:
			b.WriteByte(0xE8 + byte(r.Intn(2)))
			var d [4]byte
			binary.LittleEndian.PutUint32(d[:], uint32(int32(r.Intn(1<<20)-1<<19)))
			b.Write(d[:])
		case 2:
			b.Write([]byte{0xE8, 0xE8, 0xE9, 0x00, 0xFF, 0xE8})
		default:
			for i := r.Intn(12); i >= 0; i-- {
				b.WriteByte(byte(r.Intn(256)))
			}
		}
	}
	return b.Bytes()
}

func TestDecompressXZWithBCJ(t *testing.T) {
	want := codeLike()
	p := filepath.Join("testdata", "code.bcj.xz")
	if *update {
		cmd := exec.Command("xz", "--format=xz", "--check=crc32", "--x86", "--lzma2=dict=1MiB", "-c")
		cmd.Stdin = bytes.NewReader(want)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("xz: %v", err)
		}
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	xz, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update with xz installed)", err)
	}
	got, err := decompressXZ(xz)
	if err != nil {
		t.Fatalf("decompressXZ() = %v", err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("decompressXZ() differs from the original at byte %d (len %d, want %d)", i, len(got), len(want))
	}
}

func TestDecompressXZRejects(t *testing.T) {
	if _, err := decompressXZ([]byte("not xz at all")); err == nil {
		t.Errorf("decompressXZ(garbage) = nil error, want an error")
	}
}

// fakeBzImage builds the part of a bzImage header Payload reads.
func fakeBzImage(setupSects byte, payload []byte, version uint16) []byte {
	b := make([]byte, (int(setupSects)+1)*512+100+len(payload))
	b[0x1F1] = setupSects
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x206:], version)
	binary.LittleEndian.PutUint32(b[0x248:], 100)
	binary.LittleEndian.PutUint32(b[0x24C:], uint32(len(payload)))
	copy(b[(int(setupSects)+1)*512+100:], payload)
	return b
}

func TestPayload(t *testing.T) {
	got, err := Payload(fakeBzImage(3, []byte("PAYLOAD"), 0x20f))
	if err != nil || string(got) != "PAYLOAD" {
		t.Errorf("Payload() = %q, %v; want PAYLOAD", got, err)
	}
	if _, err := Payload(fakeBzImage(3, []byte("P"), 0x206)); err == nil {
		t.Errorf("Payload(protocol 2.06) = nil error, want an error")
	}
	if _, err := Payload(make([]byte, 4096)); err == nil {
		t.Errorf("Payload(no HdrS) = nil error, want an error")
	}
	if _, err := ExtractVmlinux(fakeBzImage(3, []byte("gzip?"), 0x20f)); err == nil {
		t.Errorf("ExtractVmlinux(non-xz payload) = nil error, want an error")
	}
}

func TestHasNote(t *testing.T) {
	note := func(name string, typ uint32, desc []byte) []byte {
		var b bytes.Buffer
		n := append([]byte(name), 0)
		binary.Write(&b, binary.LittleEndian, [3]uint32{uint32(len(n)), uint32(len(desc)), typ})
		b.Write(n)
		b.Write(make([]byte, (4-len(n)%4)%4))
		b.Write(desc)
		b.Write(make([]byte, (4-len(desc)%4)%4))
		return b.Bytes()
	}
	notes := append(note("Linux", 6, []byte{1, 2, 3}), note("Xen", 18, []byte{0, 0, 0, 1, 0, 0, 0, 0})...)
	if !hasNote(notes, "Xen", 18) {
		t.Errorf("hasNote(Xen PHYS32_ENTRY) = false, want true")
	}
	if hasNote(notes, "Xen", 17) || hasNote(notes[:len(notes)-4], "Xen", 18) {
		t.Errorf("hasNote() found a note that is absent or truncated")
	}
	if err := CheckPVH([]byte("not an elf")); err == nil {
		t.Errorf("CheckPVH(garbage) = nil, want an error")
	}
}

func TestFindNewest(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"6.9.0-1-amd64", "6.10.0-2-amd64", "6.12.0-9-amd64"} {
		if err := os.MkdirAll(filepath.Join(root, "boot"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "boot", "vmlinuz-"+v), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if v == "6.12.0-9-amd64" {
			continue // no modules: not usable
		}
		if err := os.MkdirAll(filepath.Join(root, "lib", "modules", v), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "lib", "modules", v, "modules.dep"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k, err := Find(root)
	if err != nil || k.Version != "6.10.0-2-amd64" {
		t.Errorf("Find() = %q, %v; want 6.10.0-2-amd64", k.Version, err)
	}
	if _, err := Find(t.TempDir()); err == nil {
		t.Errorf("Find(empty root) = nil error, want an error")
	}
}
