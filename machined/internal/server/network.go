package server

import (
	"sort"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/netcfg"
)

// Network is what Status reports of the node's network (netcfg.Configurator).
type Network interface {
	State() netcfg.State
	Routes() ([]string, error)
}

// networkStatus maps the configurator's state to the API's; a failure to list routes is one more problem.
func networkStatus(n Network) *machine.NetworkStatus {
	st := n.State()
	r := &machine.NetworkStatus{Search: st.Search, Problems: st.Problems}
	for _, a := range st.Nameservers {
		r.Nameservers = append(r.Nameservers, a.String())
	}
	names := make([]string, 0, len(st.Addrs))
	for name := range st.Addrs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		l := &machine.NetworkLink{Name: name, Static: st.Static[name]}
		for _, a := range st.Addrs[name] {
			l.Addresses = append(l.Addresses, a.String())
		}
		r.Links = append(r.Links, l)
	}
	routes, err := n.Routes()
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	r.Routes = routes
	return r
}
