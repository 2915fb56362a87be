package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// VM is one node. Create it with New, then Start it.
type VM struct {
	cfg    Config
	ports  map[int]int // guest port → host port
	tscKHz int

	mu      sync.Mutex
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed when QEMU has exited
	waitErr error
}

// New checks c, fills defaults and picks free host ports for the API, the probe and c.Ports.
func New(c Config) (*VM, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	v := &VM{cfg: c, ports: map[int]int{}, tscKHz: c.TSCKHz}
	var guest []int
	for _, g := range append([]int{APIPort, ProbePort}, c.Ports...) {
		if !slices.Contains(guest, g) {
			guest = append(guest, g)
		}
	}
	var free []int
	for _, g := range guest {
		if h := c.HostPorts[g]; h != 0 {
			v.ports[g] = h
		} else {
			free = append(free, g)
		}
	}
	host, err := freePorts(len(free))
	if err != nil {
		return nil, fmt.Errorf("qemu: free host ports for guest ports %v: %w", free, err)
	}
	for i, g := range free {
		v.ports[g] = host[i]
	}
	if v.tscKHz == 0 && c.Mode == ModeVmlinux && c.Machine == MachineMicrovm {
		v.tscKHz = hostTSCKHz()
	}
	return v, nil
}

// Args returns QEMU's arguments (without the binary).
func (v *VM) Args() []string { return args(v.cfg, v.ports, v.tscKHz) }

// Command is the command line Start runs: QEMU and its arguments, through nice(1) when the config asks
// for a niceness, so QEMU starts at it and every thread it makes inherits it (setpriority on a started
// QEMU would race with the vCPU threads it is making).
func (v *VM) Command() []string {
	argv := append([]string{v.cfg.QEMU}, v.Args()...)
	if v.cfg.Nice != 0 {
		argv = append([]string{"nice", "-n", strconv.Itoa(v.cfg.Nice)}, argv...)
	}
	return argv
}

// APIHostPort is the host port forwarded to the guest's API port.
func (v *VM) APIHostPort() int { return v.ports[APIPort] }

// HostPort is the host port forwarded to guest port g, 0 if g is not forwarded.
func (v *VM) HostPort(g int) int { return v.ports[g] }

// ConsolePath is the file the guest's serial console is written to.
func (v *VM) ConsolePath() string { return filepath.Join(v.cfg.Dir, ConsoleLog) }

// Started is when QEMU was started.
func (v *VM) Started() time.Time { return v.started }

// Start prepares the working directory and starts QEMU. QEMU runs in its own session, so it outlives
// a CLI that exits (cluster create) and ignores the terminal's Ctrl-C; stop it with Stop or Kill.
// ctx bounds only the preparation, not QEMU's life.
func (v *VM) Start(ctx context.Context) error {
	if err := v.prepare(ctx); err != nil {
		return err
	}
	argv := v.Command()
	cmd := exec.Command(argv[0], argv[1:]...)
	logf, err := os.Create(filepath.Join(v.cfg.Dir, "qemu.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cmd != nil {
		logf.Close()
		return errors.New("qemu: already started")
	}
	v.started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("qemu: start %s: %w", v.cfg.QEMU, err)
	}
	v.cmd, v.done = cmd, make(chan struct{})
	go func() {
		err := cmd.Wait()
		logf.Close()
		if err != nil {
			msg, _ := os.ReadFile(filepath.Join(v.cfg.Dir, "qemu.log"))
			err = fmt.Errorf("qemu %s exited: %w: %s", v.cfg.Name, err, strings.TrimSpace(string(msg)))
		}
		v.mu.Lock()
		v.waitErr = err
		v.mu.Unlock()
		close(v.done)
	}()
	return nil
}

// prepare creates the directory, blank disks, the raw mode's boot overlay and UEFI variable store.
// Existing disks are kept, so a restarted node finds its data again.
func (v *VM) prepare(ctx context.Context) error {
	c := v.cfg
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	for _, d := range c.Disks {
		if d.File != "" {
			if _, err := os.Stat(d.File); err != nil {
				return fmt.Errorf("qemu: disk %s: %w", d.Serial, err)
			}
			continue
		}
		p := diskFile(c.Dir, d.Serial)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		err = f.Truncate(d.Size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("qemu: disk %s: %w", p, err)
		}
	}
	if c.UEFI {
		if _, err := os.Stat(filepath.Join(c.Dir, varsFile)); os.IsNotExist(err) {
			if err := copyFile(filepath.Join(c.Dir, varsFile), c.OVMFVars); err != nil {
				return fmt.Errorf("qemu: UEFI variables: %w", err)
			}
		}
	}
	if c.TPM {
		if err := startSWTPM(ctx, c.Dir); err != nil {
			return err
		}
	}
	if c.Mode != ModeRaw {
		return nil
	}
	overlay := filepath.Join(c.Dir, bootDisk)
	if _, err := os.Stat(overlay); err == nil {
		return nil
	}
	raw, err := filepath.Abs(c.Raw)
	if err != nil {
		return err
	}
	a := []string{"create", "-q", "-f", "qcow2", "-F", "raw", "-b", raw, overlay}
	if c.BootDiskSize > 0 {
		a = append(a, strconv.FormatInt(c.BootDiskSize, 10))
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", a...).CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img %s: %w: %s", overlay, err, out)
	}
	return nil
}

// startSWTPM starts the VM's TPM emulator: its state in dir/tpm (kept across restarts), its control
// socket for QEMU in dir. It exits when QEMU closes the socket (--terminate), so a stopped or killed VM
// takes its TPM with it, as a machine losing power does.
func startSWTPM(ctx context.Context, dir string) error {
	state := filepath.Join(dir, "tpm")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	sock := filepath.Join(dir, swtpmSocket)
	_ = os.Remove(sock) // a previous run's
	cmd := exec.CommandContext(ctx, "swtpm", "socket", "--tpm2", "--tpmstate", "dir="+state,
		"--ctrl", "type=unixio,path="+sock, "--terminate", "--daemon",
		"--pid", "file="+filepath.Join(dir, "swtpm.pid"), "--log", "file="+filepath.Join(dir, "swtpm.log"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("qemu: start the TPM emulator (swtpm; ./hack/deps.sh qemu installs it): %w: %s", err, strings.TrimSpace(string(out)))
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "swtpm.log"))
			return fmt.Errorf("qemu: the TPM emulator made no socket %s within 5s: %s", sock, strings.TrimSpace(string(log)))
		}
	}
}

// Wait blocks until QEMU exits and returns why (nil for a clean exit).
func (v *VM) Wait() error {
	v.mu.Lock()
	done := v.done
	v.mu.Unlock()
	if done == nil {
		return errors.New("qemu: not started")
	}
	<-done
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.waitErr
}

// Exited returns a channel closed when QEMU has exited (nil before Start).
func (v *VM) Exited() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.done
}

// stopGrace is how long QEMU gets to exit after SIGTERM before it is killed.
const stopGrace = 10 * time.Second

// Stop sends SIGTERM (QEMU then exits at once, like pulling the plug), kills QEMU if it is still
// there after stopGrace, and waits for it.
func (v *VM) Stop() error {
	v.mu.Lock()
	cmd, done := v.cmd, v.done
	v.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(stopGrace):
		_ = cmd.Process.Kill()
		<-done
	}
	return nil
}

// Kill stops the QEMU whose pid file is in dir, for a process other than the one that started it
// (cluster destroy). A missing pid file or process is not an error.
func Kill(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, PIDFile))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("qemu: bad pid file %s", filepath.Join(dir, PIDFile))
	}
	// QEMU keeps the pid file locked while it runs, so a stale file (and a reused pid) is told apart.
	if !pidFileLocked(filepath.Join(dir, PIDFile)) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("qemu: stop pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(stopGrace)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// Running reports the pid of the QEMU whose pid file is in dir while that QEMU runs; ok is false when
// it has exited (also when it was killed or the host rebooted: the file then holds no lock).
func Running(dir string) (pid int, ok bool) {
	p := filepath.Join(dir, PIDFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || !pidFileLocked(p) {
		return 0, false
	}
	return pid, true
}

// pidFileLocked reports whether some process holds a lock on the pid file (QEMU locks it with fcntl).
func pidFileLocked(p string) bool {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != syscall.F_UNLCK
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
