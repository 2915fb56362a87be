package sys

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// WatchdogDevice is the kernel's first watchdog: the hardware's, or the software one (softdog) where there is none.
const WatchdogDevice = "/dev/watchdog"

// Watchdog is an open watchdog: armed from the open on, until Close disarms it.
type Watchdog struct{ f *os.File }

// OpenWatchdog opens and arms the watchdog at path with timeout (the driver may round it; the timeout
// in effect is returned).
func OpenWatchdog(path string, timeout time.Duration) (*Watchdog, time.Duration, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	secs := int(timeout / time.Second)
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.WDIOC_SETTIMEOUT, secs); err != nil {
		// Armed with the driver's own timeout, which is unknown here: keep it and pet at our rate.
		return &Watchdog{f}, timeout, fmt.Errorf("set the timeout of %s: %w", path, err)
	}
	got, err := unix.IoctlGetInt(int(f.Fd()), unix.WDIOC_GETTIMEOUT)
	if err != nil || got <= 0 {
		got = secs
	}
	return &Watchdog{f}, time.Duration(got) * time.Second, nil
}

// Keepalive resets the watchdog's timer.
func (w *Watchdog) Keepalive() error { return unix.IoctlWatchdogKeepalive(int(w.f.Fd())) }

// Close disarms the watchdog (the "magic close": a 'V' written before closing) and closes it.
func (w *Watchdog) Close() error {
	if _, err := w.f.Write([]byte("V")); err != nil {
		w.f.Close()
		return err
	}
	return w.f.Close()
}
