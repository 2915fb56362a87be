package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newPlan(g *globals) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "plan --config FILE",
		Short: "Dry run: show what Init or Join would do to which disk (format, keep, refuse and why)",
		Long: `plan asks the node what Init or Join with this config would do to each volume: format a blank
disk, keep and mount one that already carries this cluster's label, wipe one only where the config says
wipe: true, or refuse and why. Nothing is changed. It exits non-zero when any step refuses.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := readFile(file, "--config")
			if err != nil {
				return err
			}
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.Plan(cmd.Context(), &machine.PlanRequest{Config: cfg})
				if err != nil {
					return err
				}
				if g.output == "json" {
					if err := printJSON(g.stdout, r); err != nil {
						return err
					}
				} else {
					w := table(g.stdout)
					fmt.Fprintf(w, "%sVOLUME\tACTION\tDISK\tMOUNT\tWHY\n", prefix)
					for _, s := range r.Steps {
						fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\n", prefix, s.Volume, s.Action, dash(s.Disk), s.Mountpoint, s.Reason)
					}
					w.Flush()
				}
				if !r.Ok {
					return fmt.Errorf("the plan refuses: Init or Join would not start")
				}
				return nil
			})
		},
	}
	c.Flags().StringVarP(&file, "config", "c", "", "the machine config to plan for (required)")
	return c
}

func newDisks(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "disks",
		Short: "List the node's disks: size, model, serial, what is on them, and whether Cairn may use them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.Disks(cmd.Context(), &machine.DisksRequest{})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				w := table(g.stdout)
				fmt.Fprintf(w, "%sDEVICE\tSIZE\tMODEL\tSERIAL\tCONTENTS\tNOTE\n", prefix)
				for _, d := range r.Disks {
					contents, note := describeSigs(d.Signatures), d.Note
					if d.ProbeError != "" {
						contents, note = "unknown", strings.TrimPrefix(note+"; could not read: "+d.ProbeError, "; ")
					}
					fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\t%s\n", prefix, d.Path, humanSize(d.Size), dash(d.Model), dash(d.Serial), contents, note)
					for _, p := range d.Partitions {
						name := p.Path
						if name == "" {
							name = p.Name
						}
						contents := describeSigs(p.Signatures)
						if p.Label != "" {
							contents = fmt.Sprintf("%q: %s", p.Label, contents)
						}
						fmt.Fprintf(w, "%s  %s\t%s\t\t\t%s\t\n", prefix, dash(name), humanSize(p.Size), contents)
					}
				}
				return w.Flush()
			})
		},
	}
}

func newMounts(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mounts",
		Short: "List the node's mounts, with Cairn's volumes (state, ephemeral, etcd) named",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.Mounts(cmd.Context(), &machine.MountsRequest{})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				w := table(g.stdout)
				fmt.Fprintf(w, "%sVOLUME\tSOURCE\tTARGET\tTYPE\tSIZE\tUSED\tUUID\n", prefix)
				for _, m := range r.Mounts {
					fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\n", prefix, dash(m.Volume), m.Source, m.Target, m.Fstype, humanSize(m.Size), humanSize(m.Used), dash(m.Uuid))
				}
				return w.Flush()
			})
		},
	}
}

func describeSigs(sigs []*machine.Signature) string {
	if len(sigs) == 0 {
		return "blank"
	}
	var parts []string
	for _, s := range sigs {
		d := s.Type
		if s.Label != "" {
			d += fmt.Sprintf(" %q", s.Label)
		}
		if s.Uuid != "" {
			d += " " + s.Uuid
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, ", ")
}

func humanSize(n uint64) string {
	if n == 0 {
		return "-"
	}
	const unit = 1024
	v, i := float64(n), 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f%s", v, []string{"B", "KiB", "MiB", "GiB", "TiB"}[i])
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
