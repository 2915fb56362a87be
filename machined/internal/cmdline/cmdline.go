// Package cmdline reads Cairn's settings from the kernel command line.
//
//	cairn.token=TOKEN        the bootstrap token for the maintenance API (else a random one is printed)
//	cairn.join=HOST:PORT     join the cluster whose join service is there, by itself
//	cairn.jointoken=TOKEN    the join token for cairn.join
//	cairn.joinca=HASH        the SHA-256 of the machine CA the join service must chain to (hex)
//	cairn.hostname=NAME      the node's hostname before a config sets one
//	ip=...                   static addresses, in the kernel's own syntax (see ParseIP)
package cmdline

import (
	"strings"

	"github.com/cairn-os/cairn/internal/kcmdline"
)

// Params are the settings found on a command line.
type Params struct {
	Token     string
	JoinAddr  string
	JoinToken string
	Hostname  string
	IP        []IPConfig
	// All keeps every key=value (last one wins) for settings read elsewhere.
	All map[string]string
}

// Parse reads a kernel command line. Unknown parameters are kept in All and otherwise ignored: the kernel
// and its modules own most of the line.
func Parse(line string) (Params, error) {
	p := Params{All: map[string]string{}}
	for _, f := range kcmdline.Words(line) {
		key, val, _ := strings.Cut(f, "=")
		p.All[key] = val
		switch key {
		case "cairn.token":
			p.Token = val
		case "cairn.join":
			p.JoinAddr = val
		case "cairn.jointoken":
			p.JoinToken = val
		case "cairn.hostname":
			p.Hostname = val
		case "ip":
			c, err := ParseIP(val)
			if err != nil {
				return Params{}, err
			}
			if c != nil {
				p.IP = append(p.IP, *c)
			}
		}
	}
	return p, nil
}
