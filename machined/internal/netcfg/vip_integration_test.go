//go:build integration

package netcfg

import (
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// inNS runs f on a thread that is in ns (sockets are made in the namespace of the thread that opens
// them).
func inNS(t *testing.T, ns netns.NsHandle, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(err) // the thread would stay in the test's namespace
		}
	}()
	f()
}

func mustInterface(t *testing.T, ns netns.NsHandle, name string) (ifi *net.Interface) {
	t.Helper()
	inNS(t, ns, func() {
		var err error
		if ifi, err = net.InterfaceByName(name); err != nil {
			t.Fatal(err)
		}
	})
	return ifi
}

// TestVIPLink puts a VIP on the link whose subnet holds it, announces it, and takes it off again: the
// other end of the wire sees a gratuitous ARP naming the VIP with this link's hardware address.
func TestVIPLink(t *testing.T) {
	h, ns := newNamespaceWithHandle(t, "nic0")
	nic, err := h.LinkByName("nic0")
	if err != nil {
		t.Fatal(err)
	}
	peer, err := h.LinkByName("nic0-peer")
	if err != nil {
		t.Fatal(err)
	}
	for l, a := range map[netlink.Link]string{nic: "10.77.0.2/24", peer: "10.77.0.3/24"} {
		if err := h.AddrAdd(l, netlinkAddr(netip.MustParsePrefix(a))); err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	v := VIPLink{NL: h}
	vip := netip.MustParseAddr("10.77.0.100")

	if _, err := v.Add(netip.MustParseAddr("10.78.0.100")); err == nil || !strings.Contains(err.Error(), "10.77.0.0/24") {
		t.Errorf("Add(an address of no subnet here) = %v, want an error listing the subnets", err)
	}
	link, err := v.Add(vip)
	if err != nil || (link != "nic0" && link != "nic0-peer") {
		t.Fatalf("Add(%s) = %q, %v, want one of the veth pair", vip, link, err)
	}
	if !slices.Contains(addrs(t, h, link), "10.77.0.100/32") {
		t.Errorf("%s has no 10.77.0.100/32 after Add", link)
	}
	if _, err := v.Add(vip); err != nil {
		t.Errorf("a second Add() = %v, want nil", err)
	}
	listenOn := "nic0-peer"
	if link == "nic0-peer" {
		listenOn = "nic0"
	}

	got := make(chan *arp.Packet, 4)
	inNS(t, ns, func() {
		ifi, err := net.InterfaceByName(listenOn)
		if err != nil {
			t.Fatal(err)
		}
		c, err := arp.Dial(ifi)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for {
				p, _, err := c.Read()
				if err != nil {
					close(got)
					return
				}
				got <- p
			}
		}()
		if err := v.Announce(vip, link); err != nil {
			t.Errorf("Announce() = %v", err)
		}
	})
	p, ok := <-got
	if !ok {
		t.Fatal("no gratuitous ARP arrived on the other end of the wire")
	}
	ifi := mustInterface(t, ns, link)
	if p.SenderIP != vip || p.TargetIP != vip || p.SenderHardwareAddr.String() != ifi.HardwareAddr.String() {
		t.Errorf("ARP = %+v, want sender and target %s from %s", p, vip, ifi.HardwareAddr)
	}

	if err := v.Remove(vip); err != nil {
		t.Fatalf("Remove() = %v", err)
	}
	if slices.Contains(addrs(t, h, link), "10.77.0.100/32") {
		t.Errorf("%s still has the VIP after Remove", link)
	}
	if err := v.Remove(vip); err != nil {
		t.Errorf("a second Remove() = %v, want nil", err)
	}
}
