package kube

import (
	"net"
	"net/netip"
	"os"
	"slices"

	"github.com/cairn-os/cairn/api/pki"
)

// StalePKI names the leaf certificates and keys that PKI renders but that the node's disk does not
// hold as PKI would render them now: missing, unreadable, or a certificate without one of the names
// or addresses its request asks for. A node whose PKI an older Cairn wrote lacks the files and names
// added since (api.internal.<cluster> in the API server's), and a node whose address changed has
// serving certificates without the new one; its static pods would not start, or its clients would
// refuse the API server, until the set is issued again. It never looks at the CAs: they come from the
// config.
func (r *Renderer) StalePKI() []string {
	c := &cas{} // leaves only needs the names and requests, not the CAs
	var stale []string
	for _, l := range r.leaves(c) {
		if _, err := os.Stat(r.layout.PKIFile(l.key)); err != nil {
			stale = append(stale, l.key)
		}
		data, err := os.ReadFile(r.layout.PKIFile(l.cert))
		if err != nil {
			stale = append(stale, l.cert)
			continue
		}
		cert, err := pki.ParseCert(data)
		if err != nil || !covers(cert.DNSNames, cert.IPAddresses, l.req, r.primary) {
			stale = append(stale, l.cert)
		}
	}
	return stale
}

// covers says whether a certificate has every name the request asks for and, when the request has
// the node's primary address, that one. Only the primary: a secondary address that comes and goes (a
// second DHCP lease, an IPv6 one) must not re-issue the set on every boot. More is fine: an address
// the node no longer has does no harm until the next renewal.
func covers(dns []string, ips []net.IP, req pki.Request, primary netip.Addr) bool {
	for _, n := range req.DNSNames {
		if !slices.Contains(dns, n) {
			return false
		}
	}
	isPrimary := func(ip net.IP) bool { a, ok := netip.AddrFromSlice(ip); return ok && a.Unmap() == primary }
	return !slices.ContainsFunc(req.IPs, isPrimary) || slices.ContainsFunc(ips, isPrimary)
}
