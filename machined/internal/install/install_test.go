package install

import (
	"testing"

	"github.com/cairn-os/cairn/api/upgrade"
)

// The firmware must find nothing to start until everything it boots is written: systemd-boot comes last.
func TestESPFilesLoaderLast(t *testing.T) {
	files := espFiles(Source{Dir: "/medium"}, "/work/entry.efi")
	if last := files[len(files)-1]; last.dst != upgrade.LoaderPath {
		t.Errorf("the last file written is %s, want systemd-boot (%s)", last.dst, upgrade.LoaderPath)
	}
}
