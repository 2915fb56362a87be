package config

import (
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-os/cairn/api/pki"
)

// RegistryHosts are the configured registry hosts, sorted, so rendering and messages are stable.
func (m Machine) RegistryHosts() []string {
	hosts := make([]string, 0, len(m.Registries))
	for h := range m.Registries {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}

// MirrorHost is the host[:port] of a mirror URL, the key its own settings (CA, credentials) are under.
func MirrorHost(mirror string) string {
	u, err := url.Parse(mirror)
	if err != nil {
		return ""
	}
	return u.Host
}

func validateRegistries(regs map[string]Registry, e *Errors) {
	for _, host := range (Machine{Registries: regs}).RegistryHosts() {
		r := regs[host]
		p := `machine.registries["` + host + `"]`
		if !validRegistryHost(host) {
			e.add(p, "%q is not a registry host: want HOST or HOST:PORT as image names spell it (docker.io, registry.example.com:5000)", host)
		}
		for i, m := range r.Mirrors {
			u, err := url.Parse(m)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
				e.add(indexPath(p+".mirrors", i), "%q must be a URL like https://mirror.example.com:5000 (or http:// for a plain-HTTP mirror)", m)
			}
		}
		if r.CA != "" {
			if _, err := pki.ParseCert([]byte(r.CA)); err != nil {
				e.add(p+".ca", "%v", err)
			}
		}
		if (r.Username == "") != (r.Password == "") {
			e.add(p+".password", "give both username and password, or neither")
		}
		if strings.ContainsAny(r.Username, ":\n") {
			e.add(p+".username", "must not contain ':' or a newline")
		}
	}
}

// validRegistryHost accepts a DNS name or IP address with an optional port: the first part of an image
// name, which is also the directory containerd looks the host's settings up in.
func validRegistryHost(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, ""
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	if net.ParseIP(strings.Trim(host, "[]")) != nil {
		return true
	}
	return strings.Contains(host, ".") && validHostname(host) || host == "localhost"
}
