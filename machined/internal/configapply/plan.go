package configapply

import (
	"fmt"
	"strings"

	"github.com/cairn-os/cairn/api/config"
)

// Mode is how a changed config is applied.
type Mode string

const (
	// Auto applies live when every change can be, and otherwise stores the config and reboots.
	Auto Mode = "auto"
	// NoReboot applies live, and refuses a config with a change that needs a reboot.
	NoReboot Mode = "no-reboot"
	// Reboot stores the config and reboots.
	Reboot Mode = "reboot"
	// Staged stores the config for the next boot and changes nothing now.
	Staged Mode = "staged"
	// Try applies live without storing the config, and undoes it after a timeout unless confirmed; a
	// reboot meanwhile also brings the stored config back.
	Try Mode = "try"
)

// Modes lists the modes, as the CLI shows them.
var Modes = []Mode{Auto, NoReboot, Reboot, Staged, Try}

// ParseMode reads a mode; "" is Auto.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return Auto, nil
	}
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", &Refusal{Msg: fmt.Sprintf("mode %q is not one of %s", s, strings.Join(modeNames(), ", "))}
}

func modeNames() []string {
	out := make([]string, len(Modes))
	for i, m := range Modes {
		out[i] = string(m)
	}
	return out
}

// Refusal is a config or mode the node will not apply; nothing was changed. The API maps it to
// InvalidArgument.
type Refusal struct{ Msg string }

func (r *Refusal) Error() string { return r.Msg }

// InvalidArgument marks the error for the API.
func (r *Refusal) InvalidArgument() {}

// Plan is what applying a config takes.
type Plan struct {
	Mode    Mode
	Changes []config.Change
	// Live: the changes are applied to the running node now. Store: the config becomes the one stored
	// with the node lock now. RebootAfter: the node reboots once it is stored.
	Live, Store, RebootAfter bool
}

// Decide plans the changes in mode, or refuses them: an immutable path refuses the whole config (by
// name), and so does a change needing a reboot in the modes that promise none.
func Decide(changes []config.Change, mode Mode) (Plan, error) {
	p := Plan{Mode: mode, Changes: changes}
	var immutable, reboot []string
	for _, c := range changes {
		switch c.Effect {
		case config.Immutable:
			immutable = append(immutable, fmt.Sprintf("%s (%s)", c.Path, c.Why))
		case config.Reboot:
			reboot = append(reboot, c.Path)
		}
	}
	if len(immutable) > 0 {
		return p, &Refusal{Msg: "these settings are fixed once the node is initialised or joined, and cannot be applied " +
			"(reset the node and Init or Join it with the new config instead): " + strings.Join(immutable, "; ")}
	}
	if len(changes) == 0 {
		return p, nil
	}
	switch mode {
	case Auto:
		p.Store = true
		p.Live = len(reboot) == 0
		p.RebootAfter = len(reboot) > 0
	case NoReboot, Try:
		if len(reboot) > 0 {
			return p, &Refusal{Msg: fmt.Sprintf("mode %s applies only what changes live, and these settings take a reboot: %s "+
				"(use --mode auto, reboot or staged)", mode, strings.Join(reboot, ", "))}
		}
		p.Live, p.Store = true, mode == NoReboot
	case Reboot:
		p.Store, p.RebootAfter = true, true
	case Staged:
		// Stored beside the lock's config, not as it: see the node's staged config.
	default:
		return p, &Refusal{Msg: fmt.Sprintf("unknown mode %q", mode)}
	}
	return p, nil
}

// Describe is the line shown for one change.
func Describe(c config.Change) string {
	switch c.Effect {
	case config.Live:
		return fmt.Sprintf("%s: live (%s)", c.Path, c.Why)
	case config.Reboot:
		return fmt.Sprintf("%s: at the next reboot (%s)", c.Path, c.Why)
	default:
		return fmt.Sprintf("%s: refused, fixed at Init or Join (%s)", c.Path, c.Why)
	}
}

// Touches reports whether any change is at or below one of the prefixes.
func Touches(changes []config.Change, prefixes ...string) bool {
	for _, c := range changes {
		for _, p := range prefixes {
			if c.Path == p || strings.HasPrefix(c.Path, p+".") || strings.HasPrefix(c.Path, p+"[") {
				return true
			}
		}
	}
	return false
}
