package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
)

// printkSysctl holds the kernel's console log level (its first field) and three defaults after it.
const printkSysctl = "/proc/sys/kernel/printk"

// consoleWarningLevel lets the kernel's warnings (level 4) through to the console: a message reaches it
// when its level is below the console's.
const consoleWarningLevel = 5

// consoleWarnings raises the console's log level to consoleWarningLevel, once, when the boot is over.
//
// Why: the image's kernel command line says quiet, which keeps everything but errors off the serial
// console while the node boots (each line costs time under emulation). It also keeps off what a hung
// kernel says about itself: a soft lockup's "BUG:" line is an emergency, but the registers and call
// trace after it are printed at the default level, a warning. A node whose vCPUs were stuck in the kernel
// for minutes (cluster create saw "soft lockup - CPU#0 stuck for 183s! [machined:96]", both CPUs) left
// only that line on its console, and once a kernel hangs nothing else can read its log. A level already
// above (loglevel= or no quiet on the command line) is left as it is.
func consoleWarnings(log *slog.Logger) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			was, err := raiseConsoleLevel(printkSysctl, consoleWarningLevel)
			if err != nil {
				log.Warn("the kernel's warnings stay off the console", "error", err)
				return
			}
			if was < consoleWarningLevel {
				log.Info("kernel warnings now reach the console", "level", consoleWarningLevel, "was", was)
			}
		})
	}
}

// raiseConsoleLevel sets the console log level in the printk file at path to level unless it is at or
// above it already, and returns the level it found. Writing one number sets the first field alone.
func raiseConsoleLevel(path string, level int) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0, fmt.Errorf("%s is empty", path)
	}
	was, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, fmt.Errorf("%s: the console level %q is not a number", path, fields[0])
	}
	if was >= level {
		return was, nil
	}
	return was, os.WriteFile(path, []byte(strconv.Itoa(level)+"\n"), 0o644)
}
