package cmd

import (
	"fmt"
	"runtime"
	"strings"

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
			fmt.Fprintf(g.stdout, "cairnctl %s %s %s/%s\n", Version, Commit, runtime.GOOS, runtime.GOARCH)
			if clientOnly || (len(g.nodes) == 0 && g.token == "" && g.cairnconfig == "") {
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
				return nil
			})
		},
	}
	c.Flags().BoolVar(&clientOnly, "client", false, "print only cairnctl's version")
	return c
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
				if s.Sandbox {
					row("sandbox", "yes")
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
				fmt.Fprintf(w, "%sSERVICE\tSTATE\tHEALTH\tRESTARTS\tSINCE\tLAST ERROR\n", prefix)
				for _, s := range r.Services {
					since := "-"
					if s.Since != nil {
						since = ago(s.Since.AsTime())
					}
					fmt.Fprintf(w, "%s%s\t%s\t%s\t%d\t%s\t%s\n", prefix, s.Name, s.State, s.Health, s.Restarts, since, s.LastError)
				}
				return w.Flush()
			})
		},
	}
}
