package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/sys"
)

// Go runtime memory settings. machined is PID 1: if it dies the kernel panics, and whatever it holds is
// taken from the pods. Its live heap in Running is a few MB; with Go's default GOGC=100 the heap grows to
// twice that between collections, and machined allocates steadily (health probes, API calls, log lines),
// so the garbage, not the live data, set most of its resident heap. The third setting is not here: init
// starts machined with GODEBUG=disablethp=1 (init/boot.go), since the runtime reads it only at start, and
// without it Debian's kernel backed the sparse heap with 2 MiB pages that were mostly untouched.
const (
	// gcPercent: collect when the heap has grown by a third over what the last collection left. machined
	// is idle most of the time, so the extra collections cost little CPU (one every few seconds of a
	// heap of a few MB, well under a millisecond each).
	gcPercent = 33
	// memoryLimit is a soft ceiling, not a cap: near it the collector runs more often and the scavenger
	// returns freed pages to the kernel sooner, so a spike (an image import, an etcd snapshot, a burst of
	// API calls) shrinks back instead of staying resident. Go never fails an allocation because of it:
	// if live data exceeds it, the collector's CPU is capped at half a CPU and the heap grows past it,
	// which a PID 1 must prefer to any out-of-memory death. It is far above the Running heap so that
	// in normal operation only gcPercent decides.
	memoryLimit = 96 << 20
)

// tuneRuntime applies the settings above unless GOGC or GOMEMLIMIT was given (on the kernel command line
// a node passes them to init, which passes them on): an operator can always override them.
func tuneRuntime() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}

// settleDelay is how long after a sequence ends machined waits before giving memory back: the RPC that
// streamed the sequence and its client's last calls end in that time.
const settleDelay = 10 * time.Second

// releaseAfterSequences gives back the memory a finished sequence (boot, Init, Join, a restart into
// Running) used and will not use again: the freed heap goes back to the kernel, and the pages of
// machined's binary that only start-up and the sequence touched are unmapped (sys.ReleaseImagePages).
// It subscribes before it returns, so no sequence that ends after the call is missed, and works in the
// background until the process ends.
//
// onRelease, when not nil, runs before every release, told whether the sequence left the node Running:
// PID 1 keeps huge pages off what the runtime mapped since (markNoHugePages) and, in Running, narrows the
// kernel's fault-around window (faultAround); a sandbox node leaves its host alone.
func releaseAfterSequences(bus *events.Bus, log *slog.Logger, onRelease func(running bool)) {
	_, ch, cancel := bus.Subscribe(1)
	go func() {
		for {
			for e := range ch {
				if e.Kind != events.KindSequence {
					continue
				}
				time.Sleep(settleDelay)
				// The collector runs first, then every free page is returned to the kernel at once rather
				// than by the background scavenger over minutes.
				debug.FreeOSMemory()
				// The window first: what machined faults back in after the release comes in at its size.
				if onRelease != nil {
					onRelease(e.State == string(fsm.Running))
				}
				before, err := sys.ReleaseImagePages()
				if err != nil {
					log.Warn("release start-up memory", "error", err)
					continue
				}
				log.Info("released start-up memory", "sequence", e.Sequence, "binaryResidentBefore", before)
			}
			// The bus dropped us (its buffer filled while we slept): subscribe again.
			cancel()
			_, ch, cancel = bus.Subscribe(1)
		}
	}()
}

// faultAroundRunning is the fault-around window of a Running node: one page, which turns fault-around
// off (sys.FaultAround says why). It is set only once the node is Running, just before machined's release:
// the boot and Init start every program of the node, and with the kernel's 64 KiB window each of those
// starts takes a sixteenth of the page faults; in Running what machined faults back in is then only
// what it runs. Programs started later (a pod's, a restarted component's) pay their own extra minor
// faults once. The kernel command line's cairn.faultaround=BYTES sets another window (65536 keeps the
// kernel's default).
const faultAroundRunning = 4096

// faultAround narrows the kernel's fault-around window (PID 1 only), once; a kernel without the knob
// leaves its default and says so.
func faultAround(log *slog.Logger, params map[string]string) func() {
	bytes := faultAroundRunning
	if v, ok := params["cairn.faultaround"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			log.Warn("cairn.faultaround is not a number of bytes: the window is left at the kernel's default", "value", v)
			return nil
		}
		bytes = n
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			prev, err := sys.FaultAround{Dir: "/sys/kernel/debug"}.Set(bytes)
			if err != nil {
				log.Warn("fault-around window left at the kernel's default", "error", err)
				return
			}
			log.Info("fault-around window set", "bytes", bytes, "was", prev)
		})
	}
}

// pid1Release is what PID 1 does before each release (releaseAfterSequences): huge pages off the mappings
// the runtime made since the last one, and the fault-around window once the node is Running. The first
// one, after the boot's sequence, also lets the kernel's warnings through to the console (console.go).
func pid1Release(log *slog.Logger, params map[string]string) func(running bool) {
	window := faultAround(log, params)
	marking := noHugePagesWanted()
	warnings := consoleWarnings(log)
	return func(running bool) {
		warnings()
		if marking {
			markNoHugePages(log)
		}
		if running && window != nil {
			window()
		}
	}
}

// noHugePagesWanted is whether machined's memory is kept free of transparent huge pages: yes unless the
// command line gave GODEBUG=disablethp=0, which asks for them on machined's heap and so is taken to ask for
// them everywhere (init adds disablethp=1 otherwise).
func noHugePagesWanted() bool {
	return slices.Contains(strings.Split(os.Getenv("GODEBUG"), ","), "disablethp=1")
}

// markNoHugePages marks machined's anonymous mappings so that the kernel puts no transparent huge page in
// them (sys.NoHugePages says why), and returns how many it marked.
func markNoHugePages(log *slog.Logger) int {
	n, err := sys.NoHugePages()
	if err != nil {
		log.Warn("huge pages stay allowed in machined's memory", "error", err)
	}
	return n
}

// hugePagesAtStart is PID 1's first step: its mappings marked (unless GODEBUG says otherwise), then the
// process flag init set cleared, whatever GODEBUG says, before machined starts anything that would
// inherit it.
func hugePagesAtStart(log *slog.Logger) {
	n := 0
	if noHugePagesWanted() {
		n = markNoHugePages(log)
	}
	was, err := sys.AllowHugePages()
	if err != nil {
		// Every process machined starts would inherit the flag: say so, since it changes their memory.
		log.Warn("transparent huge pages stay off for every process machined starts", "error", err)
		return
	}
	log.Debug("huge pages kept off machined's memory", "mappings", n, "processFlagCleared", was)
}
