package modules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// requestIndex is an image that ships a network add-on's modules for the kernel's requests alone: they
// are in modules.dep and modules.alias but not in the load list.
func requestIndex() *Index {
	dep := "kernel/net/netfilter/x_tables.ko:\n" +
		"kernel/net/netfilter/xt_u32.ko: kernel/net/netfilter/x_tables.ko\n" +
		"kernel/net/ipv4/ip_tunnel.ko:\nkernel/net/ipv4/tunnel4.ko:\n" +
		"kernel/net/ipv4/ipip.ko: kernel/net/ipv4/tunnel4.ko kernel/net/ipv4/ip_tunnel.ko\n" +
		"kernel/net/netfilter/nfnetlink.ko:\n" +
		"kernel/net/netfilter/ipset/ip_set.ko: kernel/net/netfilter/nfnetlink.ko\n" +
		"kernel/net/netfilter/ipset/ip_set_hash_ip.ko: kernel/net/netfilter/ipset/ip_set.ko kernel/net/netfilter/nfnetlink.ko\n" +
		"kernel/drivers/net/dummy.ko:\n"
	alias := "alias ipt_u32 xt_u32\nalias ip6t_u32 xt_u32\nalias rtnl-link-ipip ipip\nalias tunl0 ipip\n" +
		"alias nfnetlink-subsys-6 ip_set\nalias ip_set_hash:ip ip_set_hash_ip\nalias rtnl-link-dummy dummy\n" +
		"alias net-pf-10 ipv6\n"
	return &Index{Order: Paths([]byte("kernel/net/netfilter/x_tables.ko\n"), nil), Deps: ParseDeps([]byte(dep)), Aliases: ParseAliases([]byte(alias))}
}

func TestResolve(t *testing.T) {
	builtin := ParseBuiltin([]byte("kernel/net/ipv6/ipv6.ko\nkernel/net/sched/sch_ingress.ko\n"))
	for _, tc := range []struct {
		name   string
		loaded []string
		want   Request
	}{
		{"rtnl-link-ipip", nil, Request{
			Files:   []string{"kernel/net/ipv4/ip_tunnel.ko", "kernel/net/ipv4/tunnel4.ko", "kernel/net/ipv4/ipip.ko"},
			Modules: []string{"ipip"}}},
		// the module's own name, dashes and underscores alike
		{"xt-u32", nil, Request{Files: []string{"kernel/net/netfilter/x_tables.ko", "kernel/net/netfilter/xt_u32.ko"}, Modules: []string{"xt_u32"}}},
		// an alias of an iptables match, with its dependency already loaded
		{"ipt_u32", []string{"x_tables"}, Request{Files: []string{"kernel/net/netfilter/xt_u32.ko"}, Modules: []string{"xt_u32"}}},
		// ipset: the subsystem, then the set type (aliases with a colon)
		{"nfnetlink-subsys-6", nil, Request{Files: []string{"kernel/net/netfilter/nfnetlink.ko", "kernel/net/netfilter/ipset/ip_set.ko"}, Modules: []string{"ip_set"}}},
		{"ip_set_hash:ip", []string{"nfnetlink", "ip_set"}, Request{Files: []string{"kernel/net/netfilter/ipset/ip_set_hash_ip.ko"}, Modules: []string{"ip_set_hash_ip"}}},
		// already loaded: it provides, nothing to load
		{"rtnl-link-dummy", []string{"dummy"}, Request{Modules: []string{"dummy"}}},
		{"sch_ingress", nil, Request{Builtin: true}},
		// an alias of a module the image does not ship, and a name nothing has
		{"net-pf-10", nil, Request{}},
		{"netdev-eth9", nil, Request{}},
	} {
		got := requestIndex().Resolve(tc.name, builtin, tc.loaded)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Resolve(%q, loaded %v) (-want +got):\n%s", tc.name, tc.loaded, diff)
		}
	}
}
