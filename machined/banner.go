package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/cairn-os/cairn/machined/internal/node"
)

// banner prints what a user needs to reach a fresh node on its console: its addresses, the API
// certificate's fingerprint to pin, and the bootstrap token when machined made one up.
func banner(w io.Writer, st node.Status, fingerprint, token string, generated bool) {
	a := st.Addresses
	if len(a) == 0 {
		a = []string{"(none yet)"}
	}
	line := strings.Repeat("=", 72)
	fmt.Fprintf(w, "\n%s\n Cairn %s  node %s  state %s\n addresses:   %s (machine API on port 50000)\n", line, version, st.Hostname, st.State, strings.Join(a, ", "))
	if st.LockedBy != "" {
		fmt.Fprintf(w, " configured by %s: the API takes client certificates from the cluster's machine CA (cairnconfig)\n%s\n\n", st.LockedBy, line)
		return
	}
	fmt.Fprintf(w, " fingerprint: %s\n", fingerprint)
	if generated {
		fmt.Fprintf(w, " token:       %s   (none given with cairn.token=)\n", token)
	}
	fmt.Fprintf(w, " cairnctl --nodes %s --token TOKEN --fingerprint %s status\n%s\n\n", a[0], fingerprint, line)
}
