//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInstall follows a node booted from the ISO through OVMF, with a blank disk and a disk holding
// someone's ext4 filesystem (issue 15, `make e2e-install`): it inits a one-node cluster from the ISO,
// refuses to install onto the foreign disk (which stays byte-identical), installs onto the blank one and
// reboots from it; the node comes back Running from slot A of that disk, with the same lock and etcd data
// (its volumes are on their own disks). About 9 minutes; `make e2e-install` runs it alone.
func TestInstall(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "install.raw")
	f, err := os.Create(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(3 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	foreign := filepath.Join(dir, "foreign.raw")
	makeForeignExt4(t, foreign)
	before := fileSum(t, foreign)

	// iso-uefi: OVMF tries the disks before the CD, so the installed disk boots once written.
	// --tpm: the node has an emulated TPM (swtpm), and its lock is measured at Init and at every boot.
	c := createCluster(t, "inst", createTimeout, "--mode", "iso-uefi", "--tpm",
		"--disk-file", "cairn-install="+target, "--disk-file", "cairn-foreign="+foreign)
	mtls := func() []string { return c.mtls(0) }
	kc := filepath.Join(c.Dir, "kubeconfig")
	waitNodeReady(t, kc, c.Nodes[0].Name)
	measured := checkMeasuredLock(t, mtls())
	kubectl(t, kc, "create", "configmap", "keep-me", "--from-literal=answer=42")
	if v := versionOf(t, mtls()); len(v.Slots) != 0 {
		t.Errorf("a node booted from the ISO reports slots %+v, want none", v.Slots)
	}
	// The ISO carries the payload as one stream, which Init unpacked onto EPHEMERAL and mounted from there;
	// the install copies that image.
	if out := mustCtl(t, time.Minute, append(mtls(), "logs", "machined")...); !strings.Contains(out, `msg="payload: unpacked"`) {
		t.Errorf("machined's log does not say Init unpacked the ISO's payload stream:\n%s", tailString(out, 3000))
	}

	t.Run("a disk holding a filesystem is refused", func(t *testing.T) {
		r := ctl(t, 2*time.Minute, append(mtls(), "install", "--disk", "serial=cairn-foreign")...)
		t.Logf("install onto the foreign disk:\n%s", r)
		if r.err == nil {
			t.Fatal("install onto a disk holding ext4 succeeded")
		}
		for _, want := range []string{"FailedPrecondition", "ext4", "--wipe"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
			}
		}
		if after := fileSum(t, foreign); after != before {
			t.Errorf("the foreign disk changed: sha256 %s before, %s after", before, after)
		}
		if s := status(t, mtls()); s.State != "Running" {
			t.Errorf("status after the refusal = %+v, want Running", s)
		}
	})

	t.Run("install onto the blank disk and boot from it", func(t *testing.T) {
		start := time.Now()
		r := ctl(t, 15*time.Minute, append(mtls(), "install", "--disk", "serial=cairn-install")...)
		t.Logf("cairnctl install (%.0fs):\n%s", time.Since(start).Seconds(), r)
		if r.err != nil {
			t.Fatal("install onto the blank disk failed")
		}
		// Each step is streamed as it happens, up to the reboot.
		for _, want := range []string{"building the boot entry", "writing the payload", "installed on", "rebooting"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("install's progress does not say %q", want)
			}
		}
		v := waitSlots(t, mtls, func(v versionResp) bool { return slotLine(v, "A").Booted })
		t.Logf("booted from the installed disk %.0fs after the install began", time.Since(start).Seconds())
		if a := slotLine(v, "A"); a.State != "good" || !a.Next || a.Version != v.Version {
			t.Errorf("slot A after the install: %+v, want good, next, version %s", a, v.Version)
		}
		if b := slotLine(v, "B"); b.State != "empty" {
			t.Errorf("slot B after the install: %+v, want empty", b)
		}
		s := waitStatus(t, mtls, upgradeBoot, func(s statusResp) bool { return s.State == "Running" })
		t.Logf("Running from the installed disk %.0fs after the install began", time.Since(start).Seconds())
		if s.LockedBy != "init" {
			t.Errorf("status from the installed disk = %+v, want locked by init (the same node)", s)
		}
		waitConfigMap(t, kc, "keep-me", "42")
		// A new boot: the PCR started from zero and holds the same measurement again.
		if again := checkMeasuredLock(t, mtls()); again != measured {
			t.Errorf("PCR %d after the reboot = %s, at Init %s: the same lock must measure the same", 15, again, measured)
		}
		var d disksResp
		ctlJSON(t, &d, append(mtls(), "disks")...)
		for _, dk := range d.Disks {
			if dk.Serial == "cairn-install" && dk.Candidate {
				t.Errorf("the disk the node booted from (%s) is a candidate for volumes (note %q)", dk.Path, dk.Note)
			}
		}
		if after := fileSum(t, foreign); after != before {
			t.Errorf("the foreign disk changed: sha256 %s before, %s after", before, after)
		}
	})
}

// fileSum is the sha256 of a whole file.
func fileSum(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkMeasuredLock checks that the node's lock is measured into its TPM and the PCR agrees with the
// node's measurement log, and returns the PCR's value.
func checkMeasuredLock(t *testing.T, mtls []string) string {
	t.Helper()
	var s struct {
		TPM struct {
			Present, Measured, Agrees bool
			Error                     string
		} `json:"tpm"`
	}
	ctlJSON(t, &s, append(mtls, "status")...)
	if !s.TPM.Present || !s.TPM.Measured || !s.TPM.Agrees {
		t.Errorf("status tpm = %+v, want present, the lock measured and the PCR agreeing", s.TPM)
	}
	out := mustCtl(t, time.Minute, append(mtls, "tpm", "pcrs", "--pcr", "15")...)
	t.Logf("tpm pcrs:\n%s", out)
	if !strings.Contains(out, "node-lock, cluster ") || !strings.Contains(out, "role controlplane") {
		t.Errorf("tpm pcrs shows no node-lock measurement:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "15" {
			return f[1]
		}
	}
	t.Errorf("tpm pcrs shows no PCR 15:\n%s", out)
	return ""
}
