package cmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newKubeconfig(g *globals) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "kubeconfig [FILE]",
		Short: "Write an admin kubeconfig for the cluster (admin only); to stdout without FILE",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r *machine.KubeconfigResponse
			err := g.firstNode(func(nc nodeClient) (err error) {
				r, err = nc.Kubeconfig(cmd.Context(), &machine.KubeconfigRequest{})
				return err
			})
			if err != nil {
				return err
			}
			if len(args) == 0 {
				_, err := g.stdout.Write(r.Kubeconfig)
				return err
			}
			if _, err := os.Stat(args[0]); err == nil && !force {
				return fmt.Errorf("%s exists; pass --force to overwrite it", args[0])
			}
			if err := os.WriteFile(args[0], r.Kubeconfig, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "wrote %s\n", args[0])
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "overwrite FILE")
	return c
}
