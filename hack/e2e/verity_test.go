//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDamagedPayload boots a node whose payload disk has one byte changed in its first block, with its
// dm-verity tree left as it was: only the kernel's check of that block against the tree can tell. The
// node must answer its API in maintenance mode, refuse to mount the payload, and say in machined's log
// that dm-verity refused it.
func TestDamagedPayload(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"vmlinux", "initramfs.cpio.zst"} {
		if err := os.Symlink(filepath.Join(imageDir, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(imageDir, "payload.squashfs"))
	if err != nil {
		t.Fatal(err)
	}
	// Past the squashfs superblock's 96 bytes, inside the first 4 KiB block: the image's size and its
	// tree still look like this build's.
	b[1000] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, "payload.squashfs"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	c := createCluster(t, "damaged", bootTimeout, "--no-init", "--image-dir", dir)
	maint := func() []string { return c.maint(t, 0) }
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r := ctlQuiet(time.Minute, append(maint(), "logs", "machined")...)
		var refused string
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.Contains(l, "payload found") {
				t.Fatalf("machined mounted a damaged payload:\n%s", l)
			}
			if strings.Contains(l, "dm-verity refused its first block") {
				refused = l
			}
		}
		if refused != "" {
			t.Logf("%s", refused)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("machined's log does not say dm-verity refused the payload after 3 minutes; last error %v; log tail:\n%s", r.err, tailString(r.stdout, 3000))
		}
		time.Sleep(5 * time.Second)
	}
	if s := status(t, maint()); s.State != "Boot" {
		t.Errorf("status = %+v, want the node in Boot, its API answering without the payload", s)
	}
}
