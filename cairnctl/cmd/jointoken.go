package cmd

import (
	"fmt"
	"strings"
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
on its kernel command line, or through an operator's 'cairnctl join'. The token is shown once. It is kept
in the cluster: every control plane admits a node with it, until it expires, is used up or is revoked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var r *machine.CreateJoinTokenResponse
			err := g.firstNode(func(nc nodeClient) (err error) {
				r, err = nc.CreateJoinToken(cmd.Context(), &machine.CreateJoinTokenRequest{Role: role, TtlSeconds: uint32(ttl / time.Second), Uses: uses})
				return err
			})
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
	jt.AddCommand(create, newJoinTokenList(g), newJoinTokenRevoke(g))
	return jt
}

func newJoinTokenList(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the cluster's live join tokens, without their secrets (admin only)",
		Long: `list shows the join tokens every control plane of the cluster honours: they are kept in the cluster,
so any control plane lists them all. A token's secret is never kept, only its hash: list shows IDs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var r *machine.ListJoinTokensResponse
			err := g.firstNode(func(nc nodeClient) (err error) {
				r, err = nc.ListJoinTokens(cmd.Context(), &machine.ListJoinTokensRequest{})
				return err
			})
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(g.stdout, r)
			}
			if len(r.Tokens) == 0 {
				// Spent and expired tokens are gone from the list: say so rather than print a bare header.
				fmt.Fprintln(g.stdout, "no join tokens in force (cairnctl join-token create makes one)")
				return nil
			}
			w := table(g.stdout)
			fmt.Fprintln(w, "ID\tROLE\tEXPIRES\tUSES LEFT")
			for _, t := range r.Tokens {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", t.Id, t.Role, t.Expires.AsTime().Local().Format(time.RFC3339), t.UsesLeft)
			}
			return w.Flush()
		},
	}
}

func newJoinTokenRevoke(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a join token on every control plane at once (admin only)",
		Long: `revoke deletes a join token, given by its ID (as 'join-token list' shows it) or as the whole token.
No control plane admits a node with it afterwards; nodes that joined with it stay.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := g.firstNode(func(nc nodeClient) error {
				_, err := nc.RevokeJoinToken(cmd.Context(), &machine.RevokeJoinTokenRequest{Id: args[0]})
				return err
			})
			if err != nil {
				return err
			}
			id, _, _ := strings.Cut(args[0], ".")
			fmt.Fprintf(g.stdout, "revoked %s\n", id)
			return nil
		},
	}
}

// caHash is the SHA-256 of the cluster's machine CA from the cairnconfig, what cairn.joinca= pins.
func (g *globals) caHash() string {
	path := g.configPath()
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
