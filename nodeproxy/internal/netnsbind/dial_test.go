package netnsbind

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// TestDialTCPFromInsideTheNamespace: the socket is the namespace's (it reaches
// a listener on the namespace's loopback, which the host's loopback is not),
// the control function runs on it before the connect, and the calling thread
// stays where it was.
func TestDialTCPFromInsideTheNamespace(t *testing.T) {
	ns := netnstest.New(t)
	var l net.Listener
	if err := ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("in")) //nolint:errcheck
			c.Close()
		}
	}()
	before, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	to := netip.MustParseAddrPort(l.Addr().String())
	var marked int
	c, err := DialTCP(ns.Path(), netip.MustParseAddrPort("0.0.0.0:0"), to, 2*time.Second, func(fd int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, 0x77); err != nil {
			return err
		}
		marked = fd
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if marked == 0 {
		t.Error("the control function did not run")
	}
	rc, _ := c.SyscallConn()
	var mark int
	rc.Control(func(fd uintptr) { mark, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK) }) //nolint:errcheck
	if mark != 0x77 {
		t.Errorf("SO_MARK = %#x, want 0x77", mark)
	}
	buf := make([]byte, 2)
	c.SetReadDeadline(time.Now().Add(2 * time.Second)) //nolint:errcheck
	if _, err := c.Read(buf); err != nil || string(buf) != "in" {
		t.Fatalf("read %q, %v: want the namespace's listener", buf, err)
	}
	if la, ok := c.LocalAddr().(*net.TCPAddr); !ok || !la.IP.IsLoopback() || la.Port == 0 {
		t.Errorf("LocalAddr %v: want the namespace's loopback and a port", c.LocalAddr())
	}
	after, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if !before.Equal(after) {
		t.Error("the calling thread changed namespace")
	}
}

// TestDialTCPFailures: a refused connect and an unanswered one are errors of
// the kind net.Dial returns (the proxy counts a timeout apart), a control
// error stops the dial, and a namespace that does not exist is an error.
func TestDialTCPFailures(t *testing.T) {
	ns := netnstest.New(t)
	unbound := netip.MustParseAddrPort("0.0.0.0:0")
	// Nothing listens on the namespace's loopback port 9: refused at once.
	_, err := DialTCP(ns.Path(), unbound, netip.MustParseAddrPort("127.0.0.1:9"), 2*time.Second, nil)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("refused: got %v, want ECONNREFUSED", err)
	}
	// A veth whose peer is down swallows the SYN (a static neighbour, so no ARP
	// failure ends it first): the connect times out.
	for _, args := range [][]string{
		{"link", "add", "va", "type", "veth", "peer", "name", "vb"}, {"addr", "add", "192.0.2.1/24", "dev", "va"},
		{"link", "set", "va", "up"}, {"neigh", "add", "192.0.2.2", "lladdr", "02:00:00:00:00:02", "dev", "va"},
	} {
		if out, err := ns.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	start := time.Now()
	_, err = DialTCP(ns.Path(), unbound, netip.MustParseAddrPort("192.0.2.2:80"), 300*time.Millisecond, nil)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("unanswered: got %v, want a net.Error with Timeout()", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the timeout of 300ms took %s", took)
	}
	boom := errors.New("boom")
	if _, err := DialTCP(ns.Path(), unbound, netip.MustParseAddrPort("127.0.0.1:9"), time.Second, func(int) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("control error: got %v, want boom", err)
	}
	if _, err := DialTCP(ns.Path()+"-missing", unbound, netip.MustParseAddrPort("127.0.0.1:9"), time.Second, nil); err == nil {
		t.Error("a missing namespace: no error")
	}
}
