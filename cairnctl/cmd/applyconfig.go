package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

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
	var o applyOptions
	c := &cobra.Command{
		Use:   "apply (--config FILE | --confirm | --rollback) [--dry-run] [--mode MODE] [--timeout 1m]",
		Short: "Apply a changed machine config to a running node: the diff first, live where possible",
		Long: `apply compares FILE with the config in force on each node, prints the difference as a unified diff of
the YAML (secrets redacted) and, for each changed path, whether it applies live, at the next reboot, or is
refused because it is fixed at Init or Join (the cluster's ID, CAs and ranges, the disks, the role). An
immutable path refuses the whole config, and nothing changes. --dry-run stops there.

Modes:
  auto       live when every change can be (the default), else the config is stored and the node reboots
  no-reboot  live only; refused when a change needs a reboot
  reboot     stored, then the node reboots
  staged     stored for the next boot; nothing changes now
  try        live, not stored: undone by itself after --timeout unless confirmed with
             cairnctl apply --confirm (a reboot meanwhile also undoes it)

Live changes restart only what reads them, one at a time, each checked healthy before the next: the kubelet
(its config and flags), the control plane's static pods (etcd, then the API server, the controller-manager,
the scheduler), the add-ons; registry mirrors rewrite containerd's hosts.toml files. A live change that fails
is undone at once. Every applied config is kept in the node's history (cairnctl config history);
--rollback applies the one before the current. Admin role.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd, g) },
	}
	c.Flags().StringVarP(&o.file, "config", "c", "", "the new machine config")
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the diff and what each change takes, change nothing")
	c.Flags().StringVar(&o.mode, "mode", "auto", "auto, no-reboot, reboot, staged or try")
	c.Flags().DurationVar(&o.timeout, "timeout", time.Minute, "try: how long until the change is undone without --confirm")
	c.Flags().BoolVar(&o.confirm, "confirm", false, "keep the config a try applied")
	c.Flags().BoolVar(&o.rollback, "rollback", false, "apply the config in force before the current one")
	return c
}

type applyOptions struct {
	file, mode                string
	dryRun, confirm, rollback bool
	timeout                   time.Duration
}

func (o applyOptions) run(cmd *cobra.Command, g *globals) error {
	req, next, err := o.request()
	if err != nil {
		return err
	}
	return g.eachNode(func(nc nodeClient, prefix string) error { return o.applyTo(cmd, g, nc, prefix, req, next) })
}

// request reads and checks the options; next is the new config (nil for --confirm and --rollback).
func (o applyOptions) request() (*machine.ApplyConfigRequest, *config.MachineConfig, error) {
	n := 0
	for _, set := range []bool{o.file != "", o.confirm, o.rollback} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, nil, errors.New("give one of --config FILE, --confirm or --rollback")
	}
	req := &machine.ApplyConfigRequest{Mode: o.mode, DryRun: o.dryRun, TimeoutSeconds: uint32(o.timeout / time.Second),
		Confirm: o.confirm, Rollback: o.rollback}
	if o.file == "" {
		return req, nil, nil
	}
	raw, err := readFile(o.file, "--config")
	if err != nil {
		return nil, nil, err
	}
	next, err := config.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	if err := config.Validate(next); err != nil {
		return nil, nil, err
	}
	req.Config = raw
	return req, next, nil
}

// applyTo prints the plan for one node (when there is a new config) and applies it there.
func (o applyOptions) applyTo(cmd *cobra.Command, g *globals, nc nodeClient, prefix string, req *machine.ApplyConfigRequest, next *config.MachineConfig) error {
	if prefix != "" {
		fmt.Fprintf(g.stdout, "# %s\n", nc.name)
	}
	if next != nil {
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
		if err := printPlan(g.stdout, cur, want, redacted); err != nil {
			return err
		}
		if o.dryRun {
			return nil
		}
	}
	return applyStream(cmd, g, nc, req, prefix)
}

// applyStream sends the request and prints the node's steps; the path lines were printed from the diff.
func applyStream(cmd *cobra.Command, g *globals, nc nodeClient, req *machine.ApplyConfigRequest, prefix string) error {
	stream, err := nc.ApplyConfig(cmd.Context(), req)
	if err != nil {
		return err
	}
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if req.Config != nil && isPathLine(e.Message) {
			continue // in the table printed from the diff already
		}
		fmt.Fprintf(g.stdout, "%s%s\n", prefix, e.Message)
	}
}

func isPathLine(msg string) bool {
	for _, s := range []string{": live (", ": at the next reboot (", ": refused, fixed at Init or Join ("} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func newConfigHistory(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "The node's machine config over time"}
	c.AddCommand(&cobra.Command{
		Use:   "history",
		Short: "List the configs applied to the node, newest first (cairnctl apply --rollback takes the one before the current)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.ConfigHistory(cmd.Context(), &machine.ConfigHistoryRequest{})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				if prefix != "" {
					fmt.Fprintf(g.stdout, "# %s\n", nc.name)
				}
				w := table(g.stdout)
				fmt.Fprintln(w, "GEN\tAPPLIED\tBY\tMODE\tSHA256\tCHANGED")
				for _, e := range r.Entries {
					gen := fmt.Sprint(e.Generation)
					if e.Current {
						gen += "*"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.12s\t%s\n", gen, e.Time.AsTime().Local().Format(time.DateTime), e.Client, e.Mode, e.Sha256, strings.Join(e.Paths, ", "))
				}
				return w.Flush()
			})
		},
	})
	return c
}

func newEdit(g *globals) *cobra.Command {
	var o applyOptions
	c := &cobra.Command{
		Use:   "edit [--mode MODE] [--dry-run]",
		Short: "Edit the node's machine config in $EDITOR, then apply it (see apply)",
		Long: `edit fetches the config in force (with its secrets: admin role), opens it in $EDITOR (vi without one) and,
once the editor exits, applies what was saved as cairnctl apply --config would. An unchanged file applies
nothing. One node at a time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, _ string) error {
				r, err := nc.GetConfig(cmd.Context(), &machine.GetConfigRequest{ShowSecrets: true})
				if err != nil {
					return err
				}
				dir, err := os.MkdirTemp("", "cairnctl-edit-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				path := filepath.Join(dir, "config.yaml")
				if err := os.WriteFile(path, r.Config, 0o600); err != nil {
					return err
				}
				editor := os.Getenv("EDITOR")
				if editor == "" {
					editor = "vi"
				}
				ed := exec.CommandContext(cmd.Context(), "sh", "-c", editor+` "$1"`, "edit", path)
				ed.Stdin, ed.Stdout, ed.Stderr = os.Stdin, g.stdout, g.stderr
				if err := ed.Run(); err != nil {
					return fmt.Errorf("%s: %w (nothing applied)", editor, err)
				}
				o.file = path
				req, next, err := o.request()
				if err != nil {
					return fmt.Errorf("%w (the edited file: nothing applied)", err)
				}
				return o.applyTo(cmd, g, nc, "", req, next)
			})
		},
	}
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the diff and what each change takes, change nothing")
	c.Flags().StringVar(&o.mode, "mode", "auto", "auto, no-reboot, reboot, staged or try")
	c.Flags().DurationVar(&o.timeout, "timeout", time.Minute, "try: how long until the change is undone without --confirm")
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
