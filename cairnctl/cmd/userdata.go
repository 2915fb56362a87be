package cmd

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
)

// newGenUserData writes a cloud image's user data: a join document with a fresh token, or a control
// plane's config that inits the node by itself.
func newGenUserData(g *globals) *cobra.Command {
	var role, endpoint, initConfig string
	var ttl time.Duration
	var uses uint32
	c := &cobra.Command{
		Use:   "userdata (--role worker|controlplane [--endpoint HOST[:PORT]] | --init CONFIG)",
		Short: "Write a node's user data: a join document with a fresh token, or a config that inits the node",
		Long: `gen userdata prints what to give a Cairn cloud image as its user data (a NoCloud seed's user-data, an
EC2-style or GCE instance's user data, an OpenStack config drive's user_data). A node boots, finds it
and acts on it without an operator; anything but a Cairn document is refused, and the node says why in
'cairnctl status' and stays in maintenance mode.

With --role, it asks the first node of --nodes (a control plane, admin role) for a join token for that
role, valid for --ttl and for --uses nodes (default one), and prints a join document: the join service
(--endpoint, default the one the control plane advertises), the token, and the hash of the cluster's
machine CA, which the node pins the join service to. Give each node its own, or give an instance group
one document with --uses as large as the nodes it may start before the token expires (kops' model: a
replaced machine joins by itself); 'cairnctl join-token revoke' ends it early.

With --init CONFIG, it prints CONFIG (a control plane's, from 'cairnctl gen config') with
'bootstrap: true': the node inits a new cluster with it. It holds the cluster's secrets; give it to one
node only, through a channel only that node reads.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out []byte
			switch {
			case initConfig != "" && role != "":
				return errors.New("--init and --role: a node either inits a cluster or joins one")
			case initConfig != "":
				raw, err := os.ReadFile(initConfig)
				if err != nil {
					return err
				}
				if out, err = config.InitUserData(raw); err != nil {
					return fmt.Errorf("%s: %w", initConfig, err)
				}
			case role != "":
				hash := g.caHash()
				if hash == "" {
					return errors.New("no machine CA to pin: give a cairnconfig whose context has the cluster's CA (--cairnconfig, --context)")
				}
				var r *machine.CreateJoinTokenResponse
				err := g.firstNode(func(nc nodeClient) (err error) {
					r, err = nc.CreateJoinToken(cmd.Context(), &machine.CreateJoinTokenRequest{Role: role, TtlSeconds: uint32(ttl / time.Second), Uses: uses})
					return err
				})
				if err != nil {
					return err
				}
				ep := endpoint
				if ep == "" && len(r.Endpoints) > 0 {
					ep = r.Endpoints[0]
				}
				if ep == "" {
					return errors.New("the control plane advertises no join service: give --endpoint HOST[:PORT]")
				}
				if out, err = config.JoinUserData(ep, r.Token, hash); err != nil {
					return err
				}
			default:
				return errors.New("say what the node does: --role worker|controlplane (join) or --init CONFIG (init)")
			}
			_, err := g.stdout.Write(out)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&role, "role", "", "the joining node's role: worker or controlplane")
	f.StringVar(&endpoint, "endpoint", "", "the join service, HOST[:PORT] (default: the one the control plane advertises)")
	f.DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid: until the node's first boot")
	f.Uint32Var(&uses, "uses", 1, "how many nodes may join with the document (an instance group's)")
	f.StringVar(&initConfig, "init", "", "a control plane's config to init the node with")
	return c
}
