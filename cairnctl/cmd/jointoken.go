package cmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
)

func newJoinToken(g *globals) *cobra.Command {
	jt := &cobra.Command{Use: "join-token", Short: "Manage the tokens that let nodes join the cluster"}
	var role string
	var ttl time.Duration
	var uses uint32
	create := &cobra.Command{
		Use:   "create",
		Short: "Make a join token on a control-plane node (admin only)",
		Long: `create asks a control-plane node for a join token. A node joins with it either by itself, booted with
  cairn.join=CONTROLPLANE:50001 cairn.jointoken=TOKEN cairn.joinca=CAHASH
on its kernel command line, or through an operator's 'cairnctl join'. The token is shown once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ncs, closeAll, err := g.clients()
			if err != nil {
				return err
			}
			defer closeAll()
			r, err := ncs[0].CreateJoinToken(cmd.Context(), &machine.CreateJoinTokenRequest{Role: role, TtlSeconds: uint32(ttl / time.Second), Uses: uses})
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.stdout, r)
			}
			fmt.Fprintf(g.stdout, "token:    %s\nexpires:  %s\n", r.Token, r.Expires.AsTime().Local().Format(time.RFC3339))
			if hash := g.caHash(); hash != "" && len(r.Endpoints) > 0 {
				fmt.Fprintf(g.stdout, "kernel command line of a node that joins by itself:\n  cairn.join=%s cairn.jointoken=%s cairn.joinca=%s\n",
					r.Endpoints[0], r.Token, hash)
			}
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "worker", "what the token admits: worker or controlplane")
	create.Flags().DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid")
	create.Flags().Uint32Var(&uses, "uses", 1, "how many nodes may join with it")
	jt.AddCommand(create)
	return jt
}

// caHash is the SHA-256 of the cluster's machine CA from the cairnconfig, what cairn.joinca= pins.
func (g *globals) caHash() string {
	path := g.cairnconfig
	if path == "" {
		path = client.DefaultConfigPath()
	}
	cfg, err := client.LoadConfig(path)
	if err != nil {
		return ""
	}
	ctx, err := cfg.Current(g.context)
	if err != nil {
		return ""
	}
	hash, _ := ctx.CAHash()
	return hash
}
