package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Control planes on one network, without VMs: each etcd member runs in a named network namespace (Start's
// Member.NetNS) whose eth0 is plugged into a bridge in another namespace, the switch.

// Namespace is a named network namespace (/run/netns/Name, so etcd can be started in it) with a netlink
// handle in it.
type Namespace struct {
	Name string
	NS   netns.NsHandle
	H    *netlink.Handle
}

// NewNamespace makes a namespace with its loopback up, deleted when the test ends.
func NewNamespace(t testing.TB, suffix string) *Namespace {
	t.Helper()
	name := fmt.Sprintf("cairn-ha-%d-%s", os.Getpid(), suffix)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	must(t, err)
	defer orig.Close()
	ns, err := netns.NewNamed(name) // this thread is now in it
	if err != nil {
		t.Fatal(err)
	}
	must(t, netns.Set(orig))
	h, err := netlink.NewHandleAt(ns)
	must(t, err)
	t.Cleanup(func() {
		h.Close()
		ns.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete network namespace %s: %v", name, err)
		}
	})
	lo, err := h.LinkByName("lo")
	must(t, err)
	must(t, h.LinkSetUp(lo))
	return &Namespace{Name: name, NS: ns, H: h}
}

// NewSwitch makes the switch: a namespace with a bridge br0 that has address cidr ("10.88.0.1/24").
func NewSwitch(t testing.TB, suffix, cidr string) (*Namespace, *netlink.Bridge) {
	t.Helper()
	sw := NewNamespace(t, suffix)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	must(t, sw.H.LinkAdd(br))
	must(t, sw.H.AddrAdd(br, Addr(cidr)))
	must(t, sw.H.LinkSetUp(br))
	return sw, br
}

// Plug connects n to the bridge br in sw with a veth pair whose end in n is eth0, with address cidr;
// port names the switch's end ("port-" + port).
func Plug(t testing.TB, sw *Namespace, br *netlink.Bridge, n *Namespace, port, cidr string) {
	t.Helper()
	peer := "to-" + port
	must(t, sw.H.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "port-" + port, MasterIndex: br.Attrs().Index}, PeerName: peer}))
	p, err := sw.H.LinkByName("port-" + port)
	must(t, err)
	must(t, sw.H.LinkSetMaster(p, br))
	must(t, sw.H.LinkSetUp(p))
	end, err := sw.H.LinkByName(peer)
	must(t, err)
	must(t, sw.H.LinkSetNsFd(end, int(n.NS)))
	end, err = n.H.LinkByName(peer)
	must(t, err)
	must(t, n.H.LinkSetName(end, "eth0"))
	must(t, n.H.AddrAdd(end, Addr(cidr)))
	must(t, n.H.LinkSetUp(end))
}

// DialIn opens connections from inside ns: a socket belongs to the namespace of the thread that made it.
func DialIn(ns netns.NsHandle) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		var c net.Conn
		err := InNS(ns, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, address)
			return err
		})
		return c, err
	}
}

// InNS runs f on this goroutine's thread moved into ns, then moves the thread back. A thread that
// cannot go back stays locked, so the runtime retires it with the goroutine.
func InNS(ns netns.NsHandle, f func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := f()
	if err := netns.Set(orig); err != nil {
		return errors.Join(ferr, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Addr parses an address with its prefix ("10.88.0.1/24") for netlink.
func Addr(cidr string) *netlink.Addr {
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		panic(err)
	}
	return a
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
