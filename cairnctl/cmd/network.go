package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newNetwork(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "network",
		Short: "Show the node's addresses, routes and resolvers, and what of machine.network it could not apply",
		Long: `Network shows the node's network as machined configured it: each interface's addresses (static ones
given by ip= or the machine config, the others leased by DHCP), the main routing table, the resolvers and
search domains written to /etc/resolv.conf, and the parts of the config's machine.network this machine
could not apply (an interface it does not have, an address the kernel refused). A sandbox node has no
network of its own and shows none.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				s, err := nc.Status(cmd.Context(), &machine.StatusRequest{})
				if err != nil {
					return err
				}
				if g.output == "json" {
					n := s.Network
					if n == nil {
						n = &machine.NetworkStatus{}
					}
					return printJSON(g.stdout, n)
				}
				if s.Network == nil {
					fmt.Fprintf(g.stdout, "%snode %s manages no network (sandbox mode: the host's is used)\n", prefix, nc.name)
					return nil
				}
				return printNetwork(g.stdout, prefix, s.Network)
			})
		},
	}
}

func printNetwork(out io.Writer, prefix string, n *machine.NetworkStatus) error {
	w := table(out)
	fmt.Fprintf(w, "%sINTERFACE\tADDRESSES\tFROM\n", prefix)
	for _, l := range n.Links {
		from := "dhcp"
		if l.Static {
			from = "static"
		}
		fmt.Fprintf(w, "%s%s\t%s\t%s\n", prefix, l.Name, strings.Join(l.Addresses, ", "), from)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(out, "%s%s:\n", prefix, title)
		for _, l := range lines {
			fmt.Fprintf(out, "%s  %s\n", prefix, l)
		}
	}
	section("routes", n.Routes)
	section("nameservers", n.Nameservers)
	section("search", n.Search)
	section("not applied", n.Problems)
	return nil
}
