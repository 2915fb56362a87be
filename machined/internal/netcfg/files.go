package netcfg

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// ResolvConf renders /etc/resolv.conf.
func ResolvConf(nameservers []netip.Addr, search []string) []byte {
	var b strings.Builder
	b.WriteString("# written by machined\n")
	seen := map[netip.Addr]bool{}
	for _, ns := range nameservers {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	return []byte(b.String())
}

// Hosts renders /etc/hosts: localhost, the node's own name, and extra names (the API endpoint name and
// each control-plane member, kept current from cluster membership: protokube's DNS job without a DNS
// provider).
func Hosts(hostname string, self netip.Addr, extra map[string][]netip.Addr) []byte {
	var b strings.Builder
	b.WriteString("# written by machined\n127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
	if hostname != "" {
		addr := "127.0.1.1"
		if self.IsValid() {
			addr = self.String()
		}
		fmt.Fprintf(&b, "%s %s\n", addr, hostname)
	}
	names := make([]string, 0, len(extra))
	for n := range extra {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, a := range extra[n] {
			fmt.Fprintf(&b, "%s %s\n", a, n)
		}
	}
	return []byte(b.String())
}
