// Command cairnctl is the only way into a Cairn node: it talks to the machine API over gRPC.
package main

import (
	"os"

	"github.com/cairn-os/cairn/cairnctl/cmd"
)

func main() { os.Exit(cmd.Execute()) }
