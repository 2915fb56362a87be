package cmd

import (
	"errors"
	"fmt"
	"io"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
)

func newGet(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "get", Short: "Read a node's state"}
	var secrets bool
	cfg := &cobra.Command{
		Use:   "config",
		Short: "Print the machine config in force on the node (secrets redacted unless --show-secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.GetConfig(cmd.Context(), &machine.GetConfigRequest{ShowSecrets: secrets})
				if err != nil {
					return err
				}
				if prefix != "" {
					fmt.Fprintf(g.stdout, "# %s\n", nc.name)
				}
				_, err = g.stdout.Write(r.Config)
				return err
			})
		},
	}
	cfg.Flags().BoolVar(&secrets, "show-secrets", false, "include the keys and tokens (admin only)")
	c.AddCommand(cfg)
	return c
}

func newApply(g *globals) *cobra.Command {
	var file string
	var dryRun bool
	c := &cobra.Command{
		Use:   "apply --config FILE --dry-run",
		Short: "Show what applying a changed machine config to a running node would do",
		Long: `apply compares FILE with the config in force on each node and prints the difference as a unified diff of
the YAML (secrets redacted), then, for each changed path, whether it would apply live, at the next reboot,
or is refused because it is fixed at Init or Join (the cluster's ID, CAs and ranges, the disks, the role).

Only --dry-run is implemented: a running node does not take a new config yet (reset and Init or Join it
with the new one). The comparison needs the config's secrets, so it takes the admin role; with another role
the secrets are compared as redacted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !dryRun {
				return errors.New("a running node cannot take a new config yet: run with --dry-run to see what would change; to change an immutable setting, reset the node and Init or Join it again")
			}
			raw, err := readFile(file, "--config")
			if err != nil {
				return err
			}
			next, err := config.Parse(raw)
			if err != nil {
				return err
			}
			if err := config.Validate(next); err != nil {
				return err
			}
			return g.eachNode(func(nc nodeClient, prefix string) error {
				cur, redacted, err := runningConfig(cmd, nc)
				if err != nil {
					return err
				}
				want := next
				if redacted {
					if want, err = config.Redact(next); err != nil {
						return err
					}
				}
				if prefix != "" {
					fmt.Fprintf(g.stdout, "# %s\n", nc.name)
				}
				return printPlan(g.stdout, cur, want, redacted)
			})
		},
	}
	c.Flags().StringVarP(&file, "config", "c", "", "the new machine config (required)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the diff and what each change takes, change nothing")
	return c
}

// runningConfig fetches the node's config with its secrets, or redacted when the caller is no admin.
func runningConfig(cmd *cobra.Command, nc nodeClient) (*config.MachineConfig, bool, error) {
	r, err := nc.GetConfig(cmd.Context(), &machine.GetConfigRequest{ShowSecrets: true})
	if status.Code(err) == codes.PermissionDenied {
		r, err = nc.GetConfig(cmd.Context(), &machine.GetConfigRequest{})
	}
	if err != nil {
		return nil, false, err
	}
	cfg, err := config.Parse(r.Config)
	if err != nil {
		return nil, false, fmt.Errorf("the node's config: %w", err)
	}
	return cfg, r.Redacted, nil
}

// printPlan prints the redacted diff and what each change would take.
func printPlan(out io.Writer, cur, next *config.MachineConfig, redacted bool) error {
	a, err := config.Redact(cur)
	if err != nil {
		return err
	}
	b, err := config.Redact(next)
	if err != nil {
		return err
	}
	ay, err := config.Marshal(a)
	if err != nil {
		return err
	}
	by, err := config.Marshal(b)
	if err != nil {
		return err
	}
	diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(ay)), B: difflib.SplitLines(string(by)),
		FromFile: "running", ToFile: "new", Context: 3})
	if err != nil {
		return err
	}
	changes, err := config.Changes(cur, next)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		_, err := fmt.Fprintln(out, "no change: the node runs this config")
		return err
	}
	fmt.Fprint(out, diff)
	w := table(out)
	fmt.Fprintln(w, "\nPATH\tTAKES\tWHY")
	count := map[config.Effect]int{}
	for _, c := range changes {
		count[c.Effect]++
		fmt.Fprintf(w, "%s\t%s\t%s\n", c.Path, c.Effect, c.Why)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d live, %d at the next reboot, %d refused (fixed at Init or Join)\n", count[config.Live], count[config.Reboot], count[config.Immutable])
	if redacted {
		fmt.Fprintln(out, "(compared without secrets: only the admin role reads them)")
	}
	return nil
}
