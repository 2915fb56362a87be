package cmd

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/cairnctl/internal/imds"
)

// newClusterIMDS is the command QEMU runs for each connection a local VM opens to 169.254.169.254:80
// (a node added with --userdata=ec2): it serves that connection's IMDSv2 requests on its standard input
// and output. Hidden: nobody runs it by hand, and its standard error goes to the guest too.
func newClusterIMDS() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:    "imds --dir DIR",
		Short:  "Serve one connection of a local VM's instance metadata service on stdin/stdout (run by QEMU)",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return imds.Server{Dir: dir}.ServeConn(os.Stdin, os.Stdout)
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	c.Flags().StringVar(&dir, "dir", "", "the node's metadata directory")
	_ = c.MarkFlagRequired("dir")
	return c
}
