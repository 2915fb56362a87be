package payload_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/payload/payloadtest"
)

func TestRecordRoundTrip(t *testing.T) {
	_, rec := payloadtest.Image(3, "a")
	got, err := payload.ParseRecord(rec.String() + "\n")
	if err != nil || got != rec {
		t.Errorf("ParseRecord(%q) = %v, %v; want %v", rec.String(), got, err, rec)
	}
}

func TestParseRecordRefuses(t *testing.T) {
	sha, root := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	for _, tc := range []struct{ text, err string }{
		{sha + " 8192", `want "SHA256 SIZE ROOTHASH DATASIZE"`},
		{sha + " 16384 " + root[:10] + " 4096", "dm-verity root hash"},
		{sha + " 16384 " + root + " 100", "not a positive multiple of 4096"},
		{sha + " 16384 " + root + " 16384", "below the image's 16384 bytes"},
		{"xyz 16384 " + root + " 4096", "payload sum"},
	} {
		if _, err := payload.ParseRecord(tc.text); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseRecord(%q) = %v, want an error containing %q", tc.text, err, tc.err)
		}
	}
}

func TestReadVerity(t *testing.T) {
	img, rec := payloadtest.Image(5, "a")
	got, err := payload.ReadVerity(bytes.NewReader(img))
	if err != nil || got != rec.Verity {
		t.Fatalf("ReadVerity() = %v, %v; want %v", got, err, rec.Verity)
	}
	other, _ := payloadtest.Image(5, "b")
	if got, _ := payload.ReadVerity(bytes.NewReader(other)); got.RootHash == rec.Verity.RootHash {
		t.Errorf("two images' trees have the same root %s", got.RootHash)
	}
	damage := func(off int, b byte) []byte {
		c := bytes.Clone(img)
		c[off] = b
		return c
	}
	data := int(rec.Verity.DataSize)
	for _, tc := range []struct {
		name string
		img  []byte
		err  string
	}{
		{"not a squashfs", damage(0, 'x'), "no squashfs image"},
		{"no tree after it", img[:data], "read the dm-verity superblock"},
		{"no top of the tree", img[:data+4096], "read the top of the dm-verity tree at byte 24576"},
		{"no verity superblock", damage(data, 'x'), "no dm-verity superblock at byte 20480"},
		{"another hash", damage(data+32, 'm'), "mha256"},
		{"a superblock for another size", damage(data+72, 9), "covers 9 blocks, the squashfs image is 5"},
	} {
		if _, err := payload.ReadVerity(bytes.NewReader(tc.img)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: ReadVerity() = %v, want an error containing %q", tc.name, err, tc.err)
		}
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	_, a := payloadtest.Image(3, "a")
	_, b := payloadtest.Image(4, "b")
	for _, rs := range []payload.Records{{a}, {a, b}} {
		got, err := payload.ParseRecords(rs.String() + "\n")
		if err != nil || !slices.Equal(got, rs) {
			t.Errorf("ParseRecords(%q) = %v, %v; want %v", rs.String(), got, err, rs)
		}
	}
	if _, err := payload.ParseRecords("\n"); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("ParseRecords(empty) = %v, want an error saying it is empty", err)
	}
	if _, err := payload.ParseRecords(a.String() + "\nnot a record\n"); err == nil {
		t.Errorf("ParseRecords with a bad second line succeeded")
	}
}

func TestRecordsFind(t *testing.T) {
	_, a := payloadtest.Image(3, "a")
	_, b := payloadtest.Image(4, "b")
	_, c := payloadtest.Image(5, "c")
	rs := payload.Records{a, b}
	if got, ok := rs.Find(b.Verity); !ok || got != b {
		t.Errorf("Find(b) = %v, %v; want %v", got, ok, b)
	}
	if got, ok := rs.Find(c.Verity); ok {
		t.Errorf("Find(c) = %v, true; want nothing: c is not recorded", got)
	}
}
