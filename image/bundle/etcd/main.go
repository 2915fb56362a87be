// Command etcd is the etcd server of the pinned version, built from its Go
// module. It lives in its own module because Kubernetes pins the etcd client
// libraries to a different etcd release than the server we ship.
//
// It is also etcdutl, etcd's offline administration tool, when called by that
// name (the etcd image carries /usr/local/bin/etcdutl as a link to it, where
// upstream's image has a separate binary): machined restores a snapshot by
// running `etcdutl snapshot restore` from this image, so that etcd's storage
// engine is linked here once and not into machined as well.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/etcdutl/v3/etcdutl"
	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	if filepath.Base(os.Args[0]) == "etcdutl" {
		if err := etcdutlCommand().Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "etcdutl:", err)
			os.Exit(1)
		}
		return
	}
	etcdmain.Main(os.Args)
}

// etcdutlCommand is etcdutl's command tree, as its own main assembles it.
func etcdutlCommand() *cobra.Command {
	root := &cobra.Command{Use: "etcdutl", Short: "An administrative command line tool for etcd3.", SilenceUsage: true}
	root.PersistentFlags().StringVarP(&etcdutl.OutputFormat, "write-out", "w", "simple", "set the output format (fields, json, protobuf, simple, table)")
	root.AddCommand(
		etcdutl.NewDefragCommand(),
		etcdutl.NewSnapshotCommand(),
		etcdutl.NewHashKVCommand(),
		etcdutl.NewVersionCommand(),
		etcdutl.NewMigrateCommand(),
	)
	return root
}
