package refuse

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/svclb/internal/capture"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// capturedPod is a netns shaped like a meshed pod's: an interface with the pod's address and
// a default route (to a veth end with no address: what is not captured vanishes), the capture
// installed (internal/capture), the node proxy's transparent listener on capture.Addr:Port,
// and the refuse table.
func capturedPod(t *testing.T, refused []netip.AddrPort) (ns *netnstest.NS, path string, accepted <-chan net.Conn) {
	t.Helper()
	ns = netnstest.New(t)
	nh, err := netlink.NewHandleAt(netns.NsHandle(ns.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	eth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "void0"}
	if err := nh.LinkAdd(eth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	for _, name := range []string{"void0", "eth0"} {
		l, err := nh.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := nh.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	addr, _ := netlink.ParseAddr("10.244.0.5/24")
	if err := nh.AddrAdd(eth, addr); err != nil {
		t.Fatal(err)
	}
	if err := nh.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.ParseIP("10.244.0.1")}); err != nil {
		t.Fatalf("default route: %v", err)
	}
	cfg := capture.DefaultConfig()
	cfg.NetNSPath = ns.Path()
	if err := capture.Install(cfg); err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	if err := ns.Do(func() (err error) {
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
			}); err != nil {
				return err
			}
			return serr
		}}
		l, err = lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(netip.MustParseAddr(capture.Addr), capture.Port).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	acc := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			acc <- c
		}
	}()
	c, release, err := Open(ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := Install(c, Sets{NoEndpoints: refused}); err != nil {
		t.Fatal(err)
	}
	return ns, ns.Path(), acc
}

func dialIn(ns *netnstest.NS, to netip.AddrPort) error {
	return ns.Do(func() error {
		c, err := net.DialTimeout("tcp4", to.String(), 2*time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
}

// in runs fn with a connection into the netns at path, as the agent does (Open: by fd).
func in(t *testing.T, path string, fn func(*nftables.Conn) error) {
	t.Helper()
	c, release, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := fn(c); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedBesideCapture: in a netns with the capture installed, a connect to a refused
// VIP:port fails with ECONNREFUSED and the node proxy's transparent listener accepts
// nothing, while a connect to another VIP:port is captured and accepted as before; the
// counters say how many SYNs were reset; updates and deletes are idempotent.
func TestRefusedBesideCapture(t *testing.T) {
	refused, other := netip.MustParseAddrPort("10.96.0.10:80"), netip.MustParseAddrPort("10.96.0.10:81")
	ns, path, accepted := capturedPod(t, []netip.AddrPort{refused})
	for range 3 {
		if err := dialIn(ns, refused); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want ECONNREFUSED", refused, err)
		}
	}
	select {
	case c := <-accepted:
		t.Fatalf("the capture listener accepted a refused connection to %s", c.LocalAddr())
	default:
	}
	if err := dialIn(ns, other); err != nil {
		t.Fatalf("dial %s (not refused): %v", other, err)
	}
	select {
	case c := <-accepted:
		if got := c.LocalAddr().String(); got != other.String() {
			t.Errorf("captured as %s, want %s", got, other)
		}
		_ = c.Close()
	case <-time.After(5 * time.Second):
		t.Fatalf("the connection to %s never reached the capture listener", other)
	}
	var counts map[netip.AddrPort]uint64
	read := func(c *nftables.Conn) error { got, err := Counts(c); counts = got.NoEndpoints; return err }
	in(t, path, read)
	if len(counts) != 1 || counts[refused] != 3 {
		t.Fatalf("counts %v, want %s: 3", counts, refused)
	}

	// Idempotent: adding what is there keeps its counter, deleting what is not is no error.
	in(t, path, func(c *nftables.Conn) error { return Update(c, Sets{NoEndpoints: []netip.AddrPort{refused}}, Sets{}) })
	in(t, path, func(c *nftables.Conn) error { return Update(c, Sets{}, Sets{NoEndpoints: []netip.AddrPort{other}}) })
	in(t, path, read)
	if len(counts) != 1 || counts[refused] != 3 {
		t.Fatalf("after idempotent updates: counts %v, want %s: 3", counts, refused)
	}
	in(t, path, func(c *nftables.Conn) error { return Update(c, Sets{}, Sets{NoEndpoints: []netip.AddrPort{refused}}) })
	in(t, path, func(c *nftables.Conn) error { return Update(c, Sets{}, Sets{NoEndpoints: []netip.AddrPort{refused}}) })
	if err := dialIn(ns, refused); err != nil {
		t.Fatalf("dial %s after it left the set: %v", refused, err)
	}
	<-accepted
	// Remove twice: the second finds nothing, which is no error; the capture stays.
	in(t, path, Remove)
	in(t, path, Remove)
	if err := capture.Check(capture.Config{NetNSPath: path, Port: capture.Port, Mark: capture.Mark, ProxyMark: capture.ProxyMark,
		RouteTable: capture.RouteTable, RulePriority: capture.RulePriority}); err != nil {
		t.Fatalf("the capture after the refuse table went: %v", err)
	}
}
