package build

import (
	"maps"
	"slices"

	"github.com/cairn-os/cairn/image/internal/kernel"
	"github.com/cairn-os/cairn/image/internal/kmod"
)

// InitModules are what init needs to mount the root image from the initramfs: a loop device over the
// image file, and the image's filesystem (zstd decompression is built into Debian's kernel).
var InitModules = []string{"loop", "squashfs"}

// RootfsModules are shipped in the root image for machined to load with kmodule. Built-in names are
// skipped at build time, so the list also holds for kernels that build some of them in. The lead
// refines this list; every entry's dependency closure and softdeps are added automatically.
var RootfsModules = []string{
	// NICs and disks: virtio on QEMU (PCI on q35, MMIO on microvm), common real hardware.
	"virtio_pci", "virtio_mmio", "virtio_net", "virtio_blk", "virtio_scsi", "virtio_rng", "virtio_console",
	"e1000", "e1000e", "ahci", "nvme", "sd_mod",
	// The boot medium, where the payload is: a CD (sr_mod, isofs) or the ISO written to a USB stick.
	"sr_mod", "isofs", "usb_storage", "uas", "xhci_pci", "ehci_pci",
	// Filesystems for STATE, EPHEMERAL, ETCD, the ESP, efivars, container layers, and the root itself.
	"xfs", "ext4", "vfat", "nls_cp437", "nls_iso8859_1", "efivarfs", "overlay", "squashfs", "loop",
	// libcrc32c asks the crypto API for crc32c at run time; there is no modprobe to answer, so ship
	// both implementations (crc32c_intel fails with ENODEV on CPUs without SSE4.2, e.g. TCG's qemu64).
	"crc32c_generic", "crc32c_intel",
	// Pod network: the CNI bridge with portmap and masquerade, flannel's vxlan, and what kube-proxy's
	// iptables/nft modes use.
	"bridge", "br_netfilter", "veth", "vxlan", "tun",
	"nf_conntrack", "nf_nat", "ip_tables", "ip6_tables", "iptable_nat", "iptable_filter", "iptable_mangle",
	"ip6table_nat", "ip6table_filter", "ip6table_mangle", "ipt_REJECT", "ip6t_REJECT",
	"xt_MASQUERADE", "xt_conntrack", "xt_comment", "xt_mark", "xt_addrtype", "xt_multiport", "xt_nat",
	"xt_tcpudp", "xt_statistic", "xt_physdev",
	// xt_recent: session affinity in kube-proxy's iptables mode.
	"xt_recent",
	"nf_tables", "nft_compat", "nft_chain_nat", "nft_ct", "nft_masq", "nft_nat", "nft_reject_inet", "nft_fib_inet",
	// kube-proxy's nftables mode (pkg/proxy/nftables) uses "ip"/"ip6" family tables, whose expressions the
	// kernel looks up per family: endpoint choice by "numgen random mod N", "fib saddr/daddr type local",
	// "reject" of traffic to services without endpoints, and named counters ("counter name"), which are
	// objref expressions. Dynamic sets and verdict maps are part of nf_tables itself. kube-proxy, flannel
	// and portmap delete stale conntrack entries over ctnetlink.
	"nft_numgen", "nft_fib_ipv4", "nft_fib_ipv6", "nft_reject_ipv4", "nft_reject_ipv6", "nft_objref",
	"nf_conntrack_netlink",
	// Bonds and VLANs of machine.network (loaded when the config asks for one).
	"bonding", "8021q",
	// QEMU's fw_cfg in sysfs: how the iso and raw modes pass per-node kernel arguments (see
	// cairnctl/internal/qemu.FwCfgCmdline).
	"qemu_fw_cfg",
	// The hardware watchdog machined arms: QEMU's i6300esb, and the common PC chipsets' (iTCO); the
	// kernel's software watchdog where there is none (machined/internal/modules.SoftWatchdog).
	"i6300esb", "iTCO_wdt", "softdog",
	// TPM (built into Debian's kernel today; listed so a modular kernel still ships them).
	"tpm_tis", "tpm_crb",
	// An encrypted STATE (machined/internal/modules.Encryption).
	"dm_mod", "dm_crypt", "ecb", "xts", "af_alg", "algif_skcipher",
	// The payload, read through dm-verity (machined/internal/modules.Verity).
	"dm_verity",
}

// RequestModules are shipped in the root image for the kernel's own requests alone (machined's modprobe
// answers them): they are in its modules.dep and modules.alias but not in its load list, so no boot
// loads them. They are what a network add-on of the user's own (cluster.network.cni: none) asks the kernel
// for, as it would on any distribution: Calico's IPIP tunnels, ipsets and their iptables matches,
// WireGuard (Calico's, Cilium's and flannel's encryption), Geneve (Cilium, OVN), Cilium's BPF classifier
// and its proxy's socket matches, NodeLocal DNSCache's dummy link, the macvlan and ipvlan CNI plugins.
// The iptables raw tables come with the CT target, which works only in them (Calico's untracked
// policies): legacy iptables asks for the table's module by name, and make kernel, which builds in what
// this list names, would otherwise leave xt_CT out (its Kconfig option depends on the raw tables').
// Left out: SCTP (1 MB, for SCTP policies) and IPVS (Cairn's kube-proxy runs nftables or iptables).
var RequestModules = []string{
	"ipip", "wireguard", "geneve", "dummy", "macvlan", "ipvlan",
	"ip_set", "ip_set_hash_ip", "ip_set_hash_net", "ip_set_hash_ipport", "ip_set_hash_ipportip",
	"ip_set_hash_ipportnet", "ip_set_hash_netport", "ip_set_hash_netnet", "ip_set_hash_netiface",
	"ip_set_hash_ipmark", "ip_set_list_set", "ip_set_bitmap_ip", "ip_set_bitmap_port", "xt_set",
	"ipt_rpfilter", "ip6t_rpfilter", "xt_u32", "xt_bpf", "xt_socket", "xt_TPROXY", "xt_CT", "xt_connmark",
	"xt_NFLOG", "iptable_raw", "ip6table_raw",
	"cls_bpf", "act_bpf", "sch_ingress",
}

// ModuleNames are the names of the modules an image built with the kernel under root ships: InitModules,
// RootfsModules and RequestModules with their dependencies and softdeps, sorted. `make kernel` builds exactly these into
// its kernel, from Debian's configuration, so an image built with that kernel ships no module at all.
func ModuleNames(root string) ([]string, error) {
	k, err := kernel.Find(root)
	if err != nil {
		return nil, err
	}
	ix, err := kmod.Load(k.Modules)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, list := range [][]string{InitModules, RootfsModules, RequestModules} {
		paths, err := ix.Closure(list)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			seen[kmod.Name(p)] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
