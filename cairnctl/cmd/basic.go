package cmd

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newVersion(g *globals) *cobra.Command {
	var clientOnly bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print cairnctl's version and, with --nodes or a cairnconfig, each node's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			askNodes := !clientOnly && g.namesNodes()
			// JSON output is the nodes' answers alone, one object each, so it parses as a stream.
			if g.output != "json" || !askNodes {
				fmt.Fprintf(g.stdout, "cairnctl %s %s %s/%s\n", Version, Commit, runtime.GOOS, runtime.GOARCH)
			}
			if !askNodes {
				return nil
			}
			return g.eachNode(func(nc nodeClient, prefix string) error {
				v, err := nc.Version(cmd.Context(), &machine.VersionRequest{})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, v)
				}
				fmt.Fprintf(g.stdout, "%snode %s: machined %s %s, Kubernetes %s, %s, %s\n", prefix, nc.name, v.Version, v.Commit, v.KubernetesVersion, v.GoVersion, v.Arch)
				if v.SlotsNote != "" {
					fmt.Fprintf(g.stdout, "%s  no boot slots: %s\n", prefix, v.SlotsNote)
				}
				for _, s := range v.Slots {
					if s.State == "empty" {
						fmt.Fprintf(g.stdout, "%s  slot %s: empty\n", prefix, s.Name)
						continue
					}
					marks := []string{s.State}
					if s.Booted {
						marks = append(marks, "booted")
					}
					if s.Next {
						marks = append(marks, "boots next")
					}
					fmt.Fprintf(g.stdout, "%s  slot %s: %s (%s)\n", prefix, s.Name, s.Version, strings.Join(marks, ", "))
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&clientOnly, "client", false, "print only cairnctl's version")
	return c
}

// namesNodes says whether the command line or a cairnconfig names nodes to ask: --nodes, --token,
// --cairnconfig, or the default cairnconfig ($CAIRNCONFIG, then ~/.cairn/config) when it exists, as
// every other command would use it.
func (g *globals) namesNodes() bool {
	if len(g.nodes) > 0 || g.token != "" || g.cairnconfig != "" {
		return true
	}
	_, err := os.Stat(g.configPath())
	return err == nil
}

func newStatus(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each node's state (Boot, Init, Join, Running, ...) and identity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				s, err := nc.Status(cmd.Context(), &machine.StatusRequest{})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, s)
				}
				w := table(g.stdout)
				row := func(k, v string) {
					if v != "" {
						fmt.Fprintf(w, "%s%s:\t%s\n", prefix, k, v)
					}
				}
				row("node", nc.name)
				row("state", s.State)
				row("sequence", s.Sequence)
				row("locked by", s.LockedBy)
				row("type", s.MachineType)
				row("hostname", s.Hostname)
				row("cluster", strings.TrimSpace(s.ClusterName+" "+s.ClusterId))
				row("addresses", strings.Join(s.Addresses, ", "))
				row("api", s.ApiMode)
				if s.BootTime != nil {
					row("up", ago(s.BootTime.AsTime()))
				}
				if s.MachinedRssBytes > 0 {
					mem := humanSize(s.MachinedRssBytes)
					if s.MachinedRssAnonBytes+s.MachinedRssFileBytes > 0 {
						mem += fmt.Sprintf(" (private %s, file pages %s)", humanSize(s.MachinedRssAnonBytes), humanSize(s.MachinedRssFileBytes))
					}
					row("machined memory", mem)
				}
				if s.Sandbox {
					row("sandbox", "yes")
				}
				row("clock", clockLine(s.Clock))
				row("tpm", tpmLine(s.Tpm))
				row("platform", platformLine(s.Platform))
				if n := s.Network; n != nil && len(n.Problems) > 0 {
					row("network", fmt.Sprintf("%d part(s) of machine.network not applied: see cairnctl network", len(n.Problems)))
				}
				for _, warning := range s.Warnings {
					row("warning", warning)
				}
				row("last error", s.LastError)
				return w.Flush()
			})
		},
	}
}

func newServices(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "services",
		Short: "List the node's services with their state, health, restarts and last error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.Services(cmd.Context(), &machine.ServicesRequest{})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				w := table(g.stdout)
				fmt.Fprintf(w, "%sSERVICE\tSTATE\tHEALTH\tRESTARTS\tSINCE\tMEMORY\tLAST ERROR\n", prefix)
				for _, s := range r.Services {
					since := "-"
					if s.Since != nil {
						since = ago(s.Since.AsTime())
					}
					mem := "-"
					if s.RssBytes > 0 {
						mem = humanSize(s.RssBytes)
					}
					fmt.Fprintf(w, "%s%s\t%s\t%s\t%d\t%s\t%s\t%s\n", prefix, s.Name, s.State, s.Health, s.Restarts, since, mem, s.LastError)
				}
				return w.Flush()
			})
		},
	}
}

func newService(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:       "service NAME start|stop|restart",
		Short:     "Start, stop or restart a supervised service (containerd, kubelet)",
		Long:      "service controls a supervised service. A stopped service stays stopped until started again or the node reboots; a crashed one is restarted by the supervisor with backoff.",
		Args:      cobra.ExactArgs(2),
		ValidArgs: []string{"start", "stop", "restart"},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, action := args[0], args[1]
			return g.eachNode(func(nc nodeClient, prefix string) error {
				req := &machine.ServiceRequest{Name: name}
				var r *machine.ServiceResponse
				var err error
				switch action {
				case "start":
					r, err = nc.ServiceStart(cmd.Context(), req)
				case "stop":
					r, err = nc.ServiceStop(cmd.Context(), req)
				case "restart":
					r, err = nc.ServiceRestart(cmd.Context(), req)
				default:
					return fmt.Errorf("action %q: want start, stop or restart", action)
				}
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				fmt.Fprintf(g.stdout, "%s%s: %s\n", prefix, r.Service.Name, r.Service.State)
				return nil
			})
		},
	}
}

// clockLine says where the node's clock comes from: "" when it keeps the machine's (no time servers).
// tpmLine says whether the node lock is measured and the TPM agrees ("" in sandbox mode, or before the
// node is locked on a machine that has none).
func tpmLine(t *machine.TPMStatus) string {
	line := measuredLine(t)
	if t.GetStateEncrypted() {
		line += "; STATE encrypted (LUKS2, the key sealed to this TPM)"
	}
	return line
}

func measuredLine(t *machine.TPMStatus) string {
	switch {
	case t == nil:
		return ""
	case !t.Present:
		return "none: the node lock is not measured"
	case !t.Measured:
		return "present; the node lock is not measured yet" + errSuffix(t.Error)
	case !t.Agrees:
		return fmt.Sprintf("node lock measured in PCR %d, but the PCR DISAGREES with the measurement log: %s", t.Pcr, t.Error)
	}
	return fmt.Sprintf("node lock measured in PCR %d (%.16x…), the PCR agrees with the measurement log", t.Pcr, t.PcrValue)
}

// platformLine says where an unconfigured node looked for user data and what came of it.
func platformLine(p *machine.PlatformStatus) string {
	tried := ""
	if len(p.GetTried()) > 0 {
		tried = " (tried " + strings.Join(p.Tried, "; ") + ")"
	}
	switch {
	case p == nil:
		return ""
	case p.Searching:
		return "looking for user data"
	case p.Error != "":
		return "user data NOT used: " + p.Error + tried
	case p.Source == "":
		return "no platform gives user data" + tried
	case p.Action == "":
		return p.Source + ": no user data"
	}
	return p.Source + ": user data says " + p.Action
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + e
}

func clockLine(c *machine.ClockStatus) string {
	switch {
	case c == nil:
		return ""
	case !c.Synced:
		return fmt.Sprintf("not synced: no answer from %s (%s)", strings.Join(c.Servers, ", "), dash(c.LastError))
	}
	line := fmt.Sprintf("synced from %s, offset %v", c.Server, time.Duration(c.OffsetNs).Round(time.Millisecond))
	if c.LastSync != nil {
		line += ", " + ago(c.LastSync.AsTime()) + " ago"
	}
	if c.Steps > 0 {
		line += fmt.Sprintf("; stepped %d time(s)", c.Steps)
	}
	if c.LastError != "" {
		line += "; last round failed: " + c.LastError
	}
	return line
}
