package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/payload/payloadtest"
)

// An install copies the ISO's payload and checks the copy against the record of the packing the ISO
// carries, whichever of the build's records that is.
func TestMediumRecord(t *testing.T) {
	dir := t.TempDir()
	_, packed := payloadtest.Image(3, "compressed")
	plainImg, plain := payloadtest.Image(5, "uncompressed")
	otherImg, _ := payloadtest.Image(3, "another build")
	recs := payload.Records{packed, plain}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, err := mediumRecord(write("plain", plainImg), recs); err != nil || got != plain {
		t.Errorf("mediumRecord(the second packing) = %v, %v; want %v", got, err, plain)
	}
	if _, err := mediumRecord(write("other", otherImg), recs); err == nil || !strings.Contains(err.Error(), "holds another build's payload") {
		t.Errorf("mediumRecord(another build's payload) = %v, want it refused", err)
	}
	if got, err := mediumRecord(filepath.Join(dir, "none"), recs); err != nil || got != packed {
		t.Errorf("mediumRecord(no file) = %v, %v; want the first record, for the installer to refuse the medium", got, err)
	}
}
