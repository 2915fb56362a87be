//go:build integration

package probe

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// LVM and MD RAID tools refuse plain files, so these images are made on loop devices (root only).

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for loop devices")
	}
}

// attachLoop attaches img to a free loop device and detaches it when the test ends.
func attachLoop(t *testing.T, img string) string {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup --find --show %s: %v\n%s", img, err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v\n%s", dev, err, out)
		}
	})
	return dev
}

// blkidValue asks blkid (a second, independent reader) for one tag of a file.
func blkidValue(t *testing.T, img, tag string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "blkid", "-p", "-o", "value", "-s", tag, img).Output()
	if err != nil {
		t.Fatalf("blkid -p -s %s %s: %v", tag, img, err)
	}
	return strings.TrimSpace(string(out))
}

func TestProbeLVM2(t *testing.T) {
	needRoot(t)
	needTools(t, "losetup", "pvcreate")
	img := sparseFile(t, 16<<20)
	dev := attachLoop(t, img)
	const pvUUID = "Ab12Cd-34Ef-56Gh-78Ij-90Kl-12Mn-345678"
	// The devices file would remember the test device after it is gone; leave it out.
	run(t, "pvcreate", "--config", "devices { use_devicesfile = 0 hints = \"none\" }", "-y", "--norestorefile", "--uuid", pvUUID, dev)
	got := probeFile(t, img)
	want := []Signature{{Type: TypeLVM2, Kind: KindLVM, Version: "2", UUID: pvUUID, Offset: 512}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Probe(LVM2 PV) mismatch (-want +got):\n%s", diff)
	}
}

func TestProbeMDRAID(t *testing.T) {
	needRoot(t)
	needTools(t, "losetup", "mdadm", "blkid")
	// mdadm --create needs the kernel's md driver (the sandbox VM's kernel has none; Debian's has it as a
	// module). Without it the superblocks cannot be made by the real tool; TestProbeMDSynthetic still runs.
	if _, err := os.Stat("/proc/mdstat"); err != nil {
		t.Skip("kernel has no md driver (/proc/mdstat missing): cannot create MD arrays here")
	}
	const size = 32 << 20
	tests := []struct {
		metadata string
		offset   int64
	}{
		{"0.90", (size &^ (64<<10 - 1)) - 64<<10},
		{"1.0", (size - 8192) &^ 4095},
		{"1.1", 0},
		{"1.2", 4096},
	}
	for i, tt := range tests {
		t.Run(tt.metadata, func(t *testing.T) {
			imgA, imgB := sparseFile(t, size), sparseFile(t, size)
			devA, devB := attachLoop(t, imgA), attachLoop(t, imgB)
			md := "/dev/md/cairn-probe-test-" + string(rune('a'+i))
			args := []string{"--create", md, "--run", "--assume-clean", "--level=1", "--raid-devices=2",
				"--metadata=" + tt.metadata, "--uuid=0123abcd:4567ef01:89abcdef:01234567", devA, devB}
			if tt.metadata != "0.90" {
				args = append(args, "--name=probetest")
			}
			run(t, "mdadm", args...)
			stopped := false
			stop := func() {
				if !stopped {
					stopped = true
					if out, err := exec.Command("mdadm", "--stop", md).CombinedOutput(); err != nil {
						t.Errorf("mdadm --stop %s: %v\n%s", md, err, out)
					}
				}
			}
			t.Cleanup(stop)
			stop() // the superblock is written; stop before reading the backing file
			got := probeFile(t, imgA)
			want := Signature{Type: TypeMD, Kind: KindRAID, Version: tt.metadata, Offset: tt.offset,
				UUID: blkidValue(t, imgA, "UUID"), Label: blkidValue(t, imgA, "LABEL")}
			if diff := cmp.Diff([]Signature{want}, got); diff != "" {
				t.Errorf("Probe(MD %s member) mismatch (-want +got):\n%s", tt.metadata, diff)
			}
		})
	}
}
