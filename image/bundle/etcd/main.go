// Command etcd is the etcd server of the pinned version, built from its Go
// module. It lives in its own module because Kubernetes pins the etcd client
// libraries to a different etcd release than the server we ship.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
