package main

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/cairn-os/cairn/api/client"

	"github.com/cairn-os/cairn/machined/internal/node"
)

// banner prints what a user needs to reach a fresh node on its console: its addresses, the API
// certificate's fingerprint to pin, and the bootstrap token when machined made one up. port is the
// machine API's. stuck is why the node could not read its lock ("" when it could): the API then refuses
// every call with that reason, so the console says it too.
func banner(w io.Writer, st node.Status, port int, fingerprint, token string, generated bool, stuck string) {
	a := st.Addresses
	if len(a) == 0 {
		a = []string{"(none yet)"}
	}
	line := strings.Repeat("=", 72)
	fmt.Fprintf(w, "\n%s\n Cairn %s  node %s  state %s\n addresses:   %s (machine API on port %d)\n", line, version, st.Hostname, st.State, strings.Join(a, ", "), port)
	if st.LockedBy != "" {
		fmt.Fprintf(w, " configured by %s: the API takes client certificates from the cluster's machine CA (cairnconfig)\n%s\n\n", st.LockedBy, line)
		return
	}
	if stuck != "" {
		fmt.Fprintf(w, " THE NODE CANNOT READ ITS LOCK and serves no call until it can: %s\n", stuck)
	}
	fmt.Fprintf(w, " fingerprint: %s\n", fingerprint)
	if generated {
		fmt.Fprintf(w, " token:       %s   (none given with cairn.token=)\n", token)
	}
	node := a[0]
	if port != client.MachinePort {
		node = net.JoinHostPort(node, strconv.Itoa(port))
	}
	fmt.Fprintf(w, " cairnctl --nodes %s --token TOKEN --fingerprint %s status\n%s\n\n", node, fingerprint, line)
}
