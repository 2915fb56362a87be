//go:build bench

package cluster

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// vmCPU follows how many host cores the VM keeps busy through Init, phase by phase. Under emulation
// that is how busy the guest's vCPUs are: a phase near the VM's vCPU count cannot be shortened by moving
// work into it, only by doing less; a phase with room left is where waits, or work that could start
// sooner, are.
type vmCPU struct {
	vm          *qemu.VM
	first, last cpuMark
	phases      []string
	err         error
}

type cpuMark struct {
	at  time.Time
	cpu time.Duration
}

func newVMCPU(vm *qemu.VM) *vmCPU {
	c := &vmCPU{vm: vm}
	c.first, c.err = c.mark()
	c.last = c.first
	return c
}

func (c *vmCPU) mark() (cpuMark, error) {
	cpu, err := c.vm.CPUTime()
	return cpuMark{at: time.Now(), cpu: cpu}, err
}

// phase ends the phase named name here, if it lasted at least min: shorter steps (most of Init's tasks)
// are folded into the next phase that is long enough to be read.
func (c *vmCPU) phase(name string, min time.Duration) {
	if c.err != nil || time.Since(c.last.at) < min {
		return
	}
	m, err := c.mark()
	if err != nil {
		c.err = err
		return
	}
	c.phases = append(c.phases, fmt.Sprintf("%s %.2f (%.0fs)", name, cores(c.last, m), m.at.Sub(c.last.at).Seconds()))
	c.last = m
}

func cores(a, b cpuMark) float64 {
	if !b.at.After(a.at) {
		return 0
	}
	return (b.cpu - a.cpu).Seconds() / b.at.Sub(a.at).Seconds()
}

// record adds the row: the mean over everything marked, and each phase, each ending at the named step.
func (c *vmCPU) record(f *figures, what string) {
	if c.err != nil {
		f.add(what, "cores", 0, "", c.err.Error())
		return
	}
	f.add(what, "cores", cores(c.first, c.last), "",
		fmt.Sprintf("of the host's %d; up to each step: %s", runtime.NumCPU(), strings.Join(c.phases, ", ")))
}
