package cmdline

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// IPConfig is one `ip=` parameter.
type IPConfig struct {
	// Address and Prefix are set for a static configuration.
	Address netip.Addr
	Prefix  int
	Gateway netip.Addr
	// Hostname, Device are optional.
	Hostname string
	Device   string
	// DHCP is true for ip=dhcp, ip=on, ip=any or autoconf "dhcp" in the long form.
	DHCP bool
	// DNS servers from the long form's dns0/dns1 fields.
	DNS []netip.Addr
}

// ParseIP reads the kernel's ip= syntax:
//
//	ip=<client-ip>:<server-ip>:<gw-ip>:<netmask>:<hostname>:<device>:<autoconf>:<dns0-ip>:<dns1-ip>
//	ip=dhcp | ip=on | ip=any | ip=off | ip=none
//
// It returns nil for off/none.
func ParseIP(v string) (*IPConfig, error) {
	switch v {
	case "off", "none":
		return nil, nil
	case "dhcp", "on", "any", "both":
		return &IPConfig{DHCP: true}, nil
	}
	f := strings.Split(v, ":")
	for len(f) < 9 {
		f = append(f, "")
	}
	c := &IPConfig{Hostname: f[4], Device: f[5]}
	switch f[6] {
	case "", "off", "none":
	case "dhcp", "on", "any", "both":
		c.DHCP = true
	default:
		return nil, fmt.Errorf("ip=%s: autoconf %q is not supported (want off, none or dhcp)", v, f[6])
	}
	if f[0] != "" {
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			return nil, fmt.Errorf("ip=%s: client address %q: %w", v, f[0], err)
		}
		c.Address = a
		c.Prefix = a.BitLen()
		if f[3] != "" {
			p, err := maskBits(f[3])
			if err != nil {
				return nil, fmt.Errorf("ip=%s: netmask: %w", v, err)
			}
			c.Prefix = p
		}
	} else if !c.DHCP {
		c.DHCP = true // no address given: the kernel falls back to autoconfiguration
	}
	if f[2] != "" {
		g, err := netip.ParseAddr(f[2])
		if err != nil {
			return nil, fmt.Errorf("ip=%s: gateway %q: %w", v, f[2], err)
		}
		c.Gateway = g
	}
	for _, d := range f[7:9] {
		if d == "" {
			continue
		}
		a, err := netip.ParseAddr(d)
		if err != nil {
			return nil, fmt.Errorf("ip=%s: dns server %q: %w", v, d, err)
		}
		c.DNS = append(c.DNS, a)
	}
	return c, nil
}

// maskBits accepts a dotted netmask (255.255.255.0) or a prefix length (24).
func maskBits(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= 128 {
		return n, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return 0, fmt.Errorf("%q is neither a dotted netmask nor a prefix length", s)
	}
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n := 0
	for v&0x80000000 != 0 {
		n++
		v <<= 1
	}
	if v != 0 {
		return 0, fmt.Errorf("%q is not a contiguous netmask", s)
	}
	return n, nil
}
