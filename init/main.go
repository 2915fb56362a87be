// Command init is PID 1 of Cairn's initramfs. It mounts the kernel filesystems, loads the few modules
// needed to mount the root image, mounts that image read-only, switches into it and execs machined.
// It imports no gRPC and nothing of machined: it has to stay small and must not fail in new ways.
//
// On any error it prints the error on the console and reboots after a pause, so a broken image shows
// why it cannot boot instead of looping through kernel panics.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "cairn init: must run as PID 1 (it deletes the initramfs it runs from)")
		os.Exit(2)
	}
	err := boot(linuxSystem{}, os.Args[1:], os.Environ())
	// boot only returns on failure: on success the process is machined now.
	fail(err)
}

// rebootDelay is how long the error stays on screen before the machine restarts.
const rebootDelay = 10 * time.Second

func fail(err error) {
	console, cerr := os.OpenFile("/dev/console", os.O_WRONLY, 0)
	if cerr != nil {
		console = os.Stderr
	}
	fmt.Fprintf(console, "\ncairn init: %v\ncairn init: rebooting in %v\n", err, rebootDelay)
	time.Sleep(rebootDelay)
	rebootNow()
	// reboot(2) does not return when it works; if it did not, never exit: PID 1 exiting panics the
	// kernel, and the message above would scroll away.
	for {
		time.Sleep(time.Hour)
	}
}
