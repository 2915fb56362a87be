//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Timeouts under TCG on two cores, with room for a busy host.
const (
	bootTimeout = 3 * time.Minute
	initTimeout = 25 * time.Minute // Init now brings up Kubernetes: minutes under emulation
	// restartTimeout bounds a configured node's way back to Running after a reboot: the start path
	// restarts containerd, kubelet and (on control planes) waits for etcd and the API server.
	restartTimeout = 10 * time.Minute
)

type planResp struct {
	Steps []struct {
		Volume string `json:"volume"`
		Disk   string `json:"disk"`
		Action string `json:"action"`
		Reason string `json:"reason"`
	} `json:"steps"`
	OK bool `json:"ok"`
}

type mountsResp struct {
	Mounts []mountEntry `json:"mounts"`
}

type mountEntry struct {
	Source string `json:"source"`
	Target string `json:"target"`
	Fstype string `json:"fstype"`
	Volume string `json:"volume"`
	UUID   string `json:"uuid"`
}

type disksResp struct {
	Disks []struct {
		Path       string `json:"path"`
		Serial     string `json:"serial"`
		Candidate  bool   `json:"candidate"`
		Note       string `json:"note"`
		Signatures []struct {
			Type  string `json:"type"`
			Label string `json:"label"`
		} `json:"signatures"`
	} `json:"disks"`
}

type event struct {
	Time     time.Time `json:"time"`
	Sequence string    `json:"sequence"`
	Task     string    `json:"task"`
	Kind     string    `json:"kind"`
	Outcome  string    `json:"outcome"`
	Message  string    `json:"message"`
	Error    string    `json:"error"`
}

// TestVmlinux boots the initramfs directly (microvm) with blank disks and follows one node in
// maintenance mode: the API with the token from the kernel command line, a reset by the kernel's
// software watchdog, a reboot back to Boot, a dry-run plan that formats blank disks, and a shutdown that
// ends QEMU (issues 3 and 4). Init, and the
// volumes surviving a reboot, are TestControlPlane's: one Init under TCG costs minutes.
func TestVmlinux(t *testing.T) {
	c := createCluster(t, "vm", bootTimeout, "--no-init")
	n := c.Nodes[0]
	// Flags for the maintenance API of the node's current boot, read when called; each (sub)test
	// passes its own t.
	maint := func(t *testing.T) func() []string { return func() []string { return c.maint(t, 0) } }

	s := status(t, maint(t)())
	if s.State != "Boot" || s.APIMode != "maintenance" || s.LockedBy != "" {
		t.Fatalf("status of a fresh node = %+v, want Boot in maintenance mode, unlocked", s)
	}
	t.Run("token is required", func(t *testing.T) {
		flags := maint(t)()
		flags[3] = "not-the-token"
		r := ctl(t, time.Minute, append(flags, "status")...)
		if r.err == nil || !strings.Contains(r.stderr, "Unauthenticated") {
			t.Errorf("status with a wrong token:\n%s\nwant Unauthenticated", r)
		}
	})

	t.Run("payload found on its disk", func(t *testing.T) {
		waitPayloadFound(t, maint(t), "a disk holding a squashfs image")
	})

	// microvm has no hardware watchdog: the kernel's software one resets the node. Before the reboot
	// below, so that the line saying it is armed is this boot's.
	t.Run("software watchdog resets a node that stops petting it", func(t *testing.T) {
		checkWatchdogReset(t, n, maint(t), "software watchdog armed")
	})

	t.Run("reboot in Boot", func(t *testing.T) {
		off := consoleSize(t, n)
		out := mustCtl(t, time.Minute, append(maint(t)(), "reboot")...)
		if !strings.Contains(out, "is rebooting") {
			t.Errorf("reboot printed %q, want 'is rebooting'", out)
		}
		// The maintenance certificate is made at each boot: a new fingerprint means a new boot.
		waitConsole(t, n, off, regexp.MustCompile(`fingerprint[:=] *[0-9a-f]{64}`), bootTimeout)
		after := waitStatus(t, maint(t), bootTimeout, func(s statusResp) bool { return s.State == "Boot" })
		if !after.BootTime.After(s.BootTime) {
			t.Errorf("boot time after reboot %v, before %v: want a new boot", after.BootTime, s.BootTime)
		}
	})

	t.Run("plan formats blank disks", func(t *testing.T) {
		var p planResp
		ctlJSON(t, &p, append(maint(t)(), "plan", "--config", c.nodeConfig(0))...)
		got := map[string]string{}
		for _, st := range p.Steps {
			got[st.Volume] = st.Action
		}
		for _, v := range []string{"state", "ephemeral", "etcd"} {
			if got[v] != "format" {
				t.Errorf("plan for %s = %q, want format (blank disk); plan: %+v", v, got[v], p.Steps)
			}
		}
		if !p.OK {
			t.Errorf("plan ok = false for blank disks: %+v", p.Steps)
		}
	})

	t.Run("shutdown ends QEMU", func(t *testing.T) {
		pid := listCluster(t, c.Name).Nodes[0].PID
		out := mustCtl(t, time.Minute, append(maint(t)(), "shutdown")...)
		if !strings.Contains(out, "is shutting down") {
			t.Errorf("shutdown printed %q", out)
		}
		waitExit(t, pid, 2*time.Minute)
	})

	// Destroy works on a cluster whose VM is gone, and leaves nothing.
	mustCtl(t, time.Minute, "cluster", "destroy", "--name", c.Name, "--state-dir", stateDir)
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster destroy left %s (%v)", c.Dir, err)
	}
}

// waitEtcdMounted polls the node's mounts until the etcd volume is among them.
func waitEtcdMounted(t *testing.T, flags []string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		r := ctlQuiet(20*time.Second, append(flags, "mounts", "-o", "json")...)
		var m mountsResp
		if r.err == nil && json.Unmarshal([]byte(r.stdout), &m) == nil &&
			slices.ContainsFunc(m.Mounts, func(mt mountEntry) bool { return mt.Volume == "etcd" }) {
			t.Logf("etcd volume mounted %.1fs after the API answered", time.Since(start).Seconds())
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("the etcd volume was not mounted within %v of the reboot", timeout)
}

// etcdUUID is the filesystem UUID of the mounted etcd volume.
func etcdUUID(t *testing.T, flags []string) string {
	t.Helper()
	var m mountsResp
	ctlJSON(t, &m, append(flags, "mounts")...)
	for _, mt := range m.Mounts {
		if mt.Volume == "etcd" {
			if mt.UUID == "" || mt.Target != "/var/lib/etcd" {
				t.Fatalf("etcd mount = %+v, want /var/lib/etcd with a filesystem UUID", mt)
			}
			t.Logf("etcd volume: %s on %s, %s UUID %s", mt.Source, mt.Target, mt.Fstype, mt.UUID)
			return mt.UUID
		}
	}
	t.Fatalf("no etcd volume among the mounts: %+v", m.Mounts)
	return ""
}

// checkNoSequenceAfterReboot reads this boot's events: no task of seq (init or join) ran, and the
// volumes were mounted by the start path, which only keeps: it refuses to format a configured node's
// disks.
func checkNoSequenceAfterReboot(t *testing.T, flags []string, seq string, volumes ...string) {
	t.Helper()
	var mounted []string
	for _, e := range readEvents(t, flags) {
		if e.Sequence == seq {
			t.Errorf("event of the %s sequence after the reboot: %+v", seq, e)
		}
		if e.Kind == "task" && strings.HasPrefix(e.Task, "mount-") && e.Outcome == "done" && e.Sequence != seq {
			mounted = append(mounted, e.Sequence+"/"+e.Task)
		}
	}
	for _, v := range volumes {
		if !slices.ContainsFunc(mounted, func(m string) bool { return strings.HasSuffix(m, "/mount-"+v) }) {
			t.Errorf("after the reboot, mounted volumes per events = %v, want %s among them", mounted, v)
		}
	}
}

// TestISO boots cairn.iso through SeaBIOS with an etcd disk that holds someone else's ext4 filesystem.
// The node must reach its API, keep the CD it booted from out of the candidates, and refuse to touch the
// foreign disk: plan names it and the config field that would allow a wipe, Init is refused, the node
// stays in Boot, and not a byte of the disk changes (issues 3 and 4). Still in maintenance, it installs
// itself onto a blank disk without rebooting: never inited, it unpacks the ISO's payload stream into
// memory first. A module parameter passed as a
// per-node kernel argument reaches its module, and a module modprobe.blacklist= names is not loaded.
func TestISO(t *testing.T) {
	foreign := filepath.Join(t.TempDir(), "etcd-foreign.raw")
	makeForeignExt4(t, foreign)
	before := headTailSum(t, foreign)
	blank := filepath.Join(t.TempDir(), "install.raw")
	if err := os.WriteFile(blank, nil, 0o644); err != nil || os.Truncate(blank, 3<<30) != nil {
		t.Fatal("make the blank disk:", err)
	}

	// Among the node's own kernel arguments, which reach an ISO boot through QEMU's fw_cfg: a module
	// parameter (the kernel leaves a loadable module's to whoever loads it, and the SATA controller's
	// driver loads first thing), and a blacklisted module (kmod's modprobe.blacklist=), which must be left
	// out of the modules loaded behind the API, every module of the image's list: e1000e, a NIC this VM
	// does not have.
	c := createCluster(t, "iso", bootTimeout, "--no-init", "--mode", "iso", "--disk-file", "cairn-etcd="+foreign, "--disk-file", "cairn-install="+blank,
		"--kernel-arg", "libata.force=nodbdelay", "--kernel-arg", "modprobe.blacklist=e1000e")
	maint := func() []string { return c.maint(t, 0) } // no subtests here: t is the test's own
	if s := status(t, maint()); s.State != "Boot" {
		t.Fatalf("status = %+v, want Boot", s)
	}
	if out := mustCtl(t, time.Minute, append(maint(), "dmesg")...); !regexp.MustCompile(`ata\d+: FORCE: link flag`).MatchString(out) {
		t.Errorf("kernel log lacks libata's FORCE lines: libata.force on the command line did not reach the module")
	}

	var d disksResp
	ctlJSON(t, &d, append(maint(), "disks")...)
	var etcdDisk string
	for _, dk := range d.Disks {
		// The CD the node booted from must never be offered for a volume. (GRUB loaded the kernel and
		// initramfs from it, so the node may not list it at all: then it cannot be chosen either.)
		cd := strings.HasPrefix(dk.Path, "/dev/sr")
		for _, sig := range dk.Signatures {
			cd = cd || sig.Type == "iso9660"
		}
		if cd && dk.Candidate {
			t.Errorf("the boot CD %s is a candidate for Cairn's volumes (note %q)", dk.Path, dk.Note)
		}
		if cd {
			t.Logf("boot CD %s: candidate=%v, note %q", dk.Path, dk.Candidate, dk.Note)
		}
		if dk.Serial == "cairn-etcd" {
			etcdDisk = dk.Path
			if len(dk.Signatures) == 0 || dk.Signatures[0].Type != "ext4" || dk.Signatures[0].Label != "data" {
				t.Errorf("disk %s (cairn-etcd) signatures = %+v, want ext4 labelled data", dk.Path, dk.Signatures)
			}
		}
	}
	if !regexp.MustCompile(`^/dev/vd[a-z]$`).MatchString(etcdDisk) {
		t.Fatalf("cairn-etcd disk path = %q, want /dev/vdX", etcdDisk)
	}

	// The ISO carries the payload as one stream: found in maintenance, unpacked only once a volume is
	// mounted for it.
	if l := waitPayloadFound(t, maint, "(the ISO 9660 medium CAIRN)"); !strings.Contains(l, "one compressed stream") {
		t.Errorf("machined's line on the ISO's payload does not say it is a stream left for Init:\n%s", l)
	}

	r := ctl(t, time.Minute, append(maint(), "plan", "--config", c.nodeConfig(0))...)
	t.Logf("plan:\n%s", r)
	if r.err == nil {
		t.Errorf("plan with a foreign etcd disk succeeded, want a non-zero exit:\n%s", r)
	}
	for _, want := range []string{etcdDisk, "ext4", "machine.disks.etcd.wipe"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("plan output lacks %q:\n%s", want, r)
		}
	}

	r = ctl(t, time.Minute, append(maint(), "init", "--config", c.nodeConfig(0))...)
	t.Logf("init:\n%s", r)
	if r.err == nil || !strings.Contains(r.stderr, "FailedPrecondition") {
		t.Errorf("init with a foreign etcd disk:\n%s\nwant FailedPrecondition", r)
	}
	if s := status(t, maint()); s.State != "Boot" || s.LockedBy != "" {
		t.Errorf("status after the refused init = %+v, want Boot, unlocked", s)
	}

	r = ctl(t, 10*time.Minute, append(maint(), "install", "--disk", "serial=cairn-install", "--no-reboot")...)
	t.Logf("install from maintenance:\n%s", r)
	if r.err != nil {
		t.Errorf("install from maintenance onto the blank disk failed")
	}
	for _, want := range []string{"the ISO's stream is unpacked first", "writing the payload", "installed on"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("install's progress does not say %q", want)
		}
	}
	if s := status(t, maint()); s.State != "Boot" || s.LockedBy != "" {
		t.Errorf("status after the install without a reboot = %+v, want Boot, unlocked", s)
	}

	// machined writes its module sets to the console; the last one behind the API loads the image's
	// every other module, e1000 among them.
	waitConsole(t, c.Nodes[0], 0, regexp.MustCompile(`msg="modules loaded" set=remaining`), 4*time.Minute)
	waitConsole(t, c.Nodes[0], 0, regexp.MustCompile(`module left out: modprobe.blacklist on the command line names it" module=e1000e`), time.Second)
	if out := mustCtl(t, time.Minute, append(maint(), "dmesg")...); !strings.Contains(out, "e1000: Intel(R) PRO/1000") || strings.Contains(out, "e1000e: Intel(R) PRO/1000") {
		t.Errorf("kernel log: want e1000 loaded and e1000e not (modprobe.blacklist=e1000e)")
	}

	pid := listCluster(t, c.Name).Nodes[0].PID
	mustCtl(t, time.Minute, append(maint(), "shutdown")...)
	waitExit(t, pid, 2*time.Minute)
	if after := headTailSum(t, foreign); after != before {
		t.Errorf("the foreign disk's first and last MiB changed: sha256 %s before, %s after", before, after)
	}
}

// TestRaw boots cairn.raw (GPT, EFI system partition) through OVMF and reaches the API; the disk it
// booted from is not a candidate for Cairn's volumes; the payload is found on its slot A; and the
// hardware watchdog resets a node that stops petting it.
func TestRaw(t *testing.T) {
	c := createCluster(t, "raw", bootTimeout, "--no-init", "--mode", "raw")
	maint := func() []string { return c.maint(t, 0) }
	if s := status(t, maint()); s.State != "Boot" {
		t.Fatalf("status = %+v, want Boot", s)
	}
	var d disksResp
	ctlJSON(t, &d, append(maint(), "disks")...)
	found := false
	for _, dk := range d.Disks {
		if dk.Serial == "boot" {
			found = true
			if dk.Candidate {
				t.Errorf("the boot disk %s is a candidate (note %q), want it excluded", dk.Path, dk.Note)
			}
			t.Logf("boot disk %s: %s", dk.Path, dk.Note)
		}
	}
	if !found {
		t.Errorf("no disk with serial boot in %+v", d.Disks)
	}
	waitPayloadFound(t, maint, "(partition CAIRN-PAYLOAD-A)")

	// The hardware watchdog (QEMU's i6300esb on q35).
	checkWatchdogReset(t, c.Nodes[0], maint, "hardware watchdog armed")
}

// checkWatchdogReset: machined arms the node's watchdog (armed is what it says then) and pets it while
// the node answers; told to stop petting, as a hung node would, the machine is reset and boots again.
// It is armed once the boot's last drivers are loaded, which under emulation can come after the payload
// is found; until then watchdog-stop is refused (FailedPrecondition, no watchdog armed).
func checkWatchdogReset(t *testing.T, n node, maint func() []string, armed string) {
	t.Helper()
	waitConsole(t, n, 0, regexp.MustCompile(regexp.QuoteMeta(armed)), bootTimeout)
	before := status(t, maint())
	off := consoleSize(t, n)
	out := mustCtl(t, time.Minute, append(maint(), "debug", "watchdog-stop")...)
	if !strings.Contains(out, "resets within") {
		t.Fatalf("debug watchdog-stop printed %q, want the time to the reset", out)
	}
	waitConsole(t, n, off, regexp.MustCompile(`fingerprint[:=] *[0-9a-f]{64}`), 2*time.Minute+bootTimeout)
	after := waitStatus(t, maint, bootTimeout, func(s statusResp) bool { return s.State == "Boot" })
	if !after.BootTime.After(before.BootTime) {
		t.Errorf("boot time after the watchdog %v, before %v: want a new boot", after.BootTime, before.BootTime)
	}
}

// waitPayloadFound waits for machined to say it found, checked and mounted the payload on the boot
// medium (it does so in maintenance, before any Init; the ISO's stream is found there and unpacked at
// Init), and returns that line: it names where, which must contain on. A search that failed is reported
// with its reason at once.
func waitPayloadFound(t *testing.T, maint func() []string, on string) string {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		r := ctlQuiet(time.Minute, append(maint(), "logs", "machined")...)
		for _, l := range strings.Split(r.stdout, "\n") {
			switch {
			case strings.Contains(l, "payload found"):
				if !strings.Contains(l, on) {
					t.Fatalf("machined found the payload elsewhere than %q:\n%s", on, l)
				}
				t.Logf("%s", l)
				return l
			case strings.Contains(l, "msg=payload") && strings.Contains(l, "error="):
				t.Fatalf("machined did not find the payload:\n%s", l)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 'payload found' in machined's log after 4 minutes; last error %v; log tail:\n%s", r.err, tailString(r.stdout, 2000))
		}
		time.Sleep(5 * time.Second)
	}
}

// makeForeignExt4 makes a 2 GiB sparse disk with an ext4 filesystem labelled data holding one file, as
// a disk from another system would.
func makeForeignExt4(t *testing.T, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	note := filepath.Join(t.TempDir(), "important.txt")
	if err := os.WriteFile(note, []byte("somebody's data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"mkfs.ext4", "-q", "-F", "-L", "data", p},
		{"debugfs", "-w", "-R", "write " + note + " important.txt", p},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// headTailSum is the sha256 of a file's first and last MiB: where partition tables, superblocks and
// their backups live.
func headTailSum(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(h, io.NewSectionReader(f, fi.Size()-1<<20, 1<<20)); err != nil {
		t.Fatal(err)
	}
	return string(h.Sum(nil))
}

// TestSelfJoinTrust boots a node told to join by itself (cairn.join=, cairn.jointoken=) with no
// cairn.joinca=: it must not ask anyone for a ticket, stay in Boot and say why; with cairn.joinca=insecure
// it asks, and says in status that it does not check whom it talks to (issue 22). Nothing answers at the
// join address, so neither node joins.
func TestSelfJoinTrust(t *testing.T) {
	for _, tc := range []struct {
		name, ca, lastError, warning string
	}{
		{"unpinned", "", "cairn.join= is set without cairn.joinca=", ""},
		{"insecure", "cairn.joinca=insecure", "", "without checking whom it talks to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--no-init", "--kernel-arg", "cairn.join=10.5.0.9:50001", "--kernel-arg", "cairn.jointoken=abcdef.0123456789abcdef"}
			if tc.ca != "" {
				args = append(args, "--kernel-arg", tc.ca)
			}
			c := createCluster(t, "trust-"+tc.name, bootTimeout, args...)
			var st struct {
				State     string   `json:"state"`
				LastError string   `json:"last_error"`
				Warnings  []string `json:"warnings"`
			}
			ctlJSON(t, &st, append(c.maint(t, 0), "status")...)
			if st.State != "Boot" || !strings.Contains(st.LastError, tc.lastError) || (tc.lastError == "" && st.LastError != "") ||
				!strings.Contains(strings.Join(st.Warnings, "; "), tc.warning) || (tc.warning == "" && len(st.Warnings) > 0) {
				t.Errorf("status = %+v; want Boot, last error %q, warning %q", st, tc.lastError, tc.warning)
			}
			checkDestroy(t, c)
		})
	}
}
