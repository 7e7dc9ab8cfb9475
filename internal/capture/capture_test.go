package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/svclb/internal/testing/golden"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

const (
	podIP = "10.244.0.5"
	vip   = "10.96.0.10"
	// nodeIP is the node's InternalIP, reached through the pod's gateway (newPeerNS holds it).
	nodeIP = "172.18.0.3"
)

// goldenConfig is the capture testdata/ruleset.golden shows: the default with two node
// addresses.
func goldenConfig(netnsPath string) Config {
	cfg := DefaultConfig()
	cfg.NetNSPath = netnsPath
	cfg.NodeAddrs = []netip.Addr{netip.MustParseAddr(nodeIP), netip.MustParseAddr("192.168.9.1")}
	return cfg
}

// newPodNS makes a throwaway named netns shaped like a pod's: lo, one
// interface with the pod address and a default route through it (one end of a
// veth pair whose other end has no address, so uncaptured packets vanish
// instead of going anywhere).
func newPodNS(t *testing.T) (string, netns.NsHandle) {
	t.Helper()
	n := netnstest.New(t)
	ns := netns.NsHandle(n.Fd())
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	d := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "void0"}
	if err := nh.LinkAdd(d); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	if err := nh.LinkSetUp(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "void0"}}); err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr(podIP + "/24")
	if err := nh.AddrAdd(d, addr); err != nil {
		t.Fatal(err)
	}
	if err := nh.LinkSetUp(d); err != nil {
		t.Fatal(err)
	}
	if err := nh.RouteAdd(&netlink.Route{LinkIndex: d.Attrs().Index, Gw: net.ParseIP("10.244.0.1")}); err != nil {
		t.Fatalf("default route: %v", err)
	}
	return n.Path(), ns
}

// inNS runs fn on a thread inside ns and waits for it. fn runs off the test
// goroutine, so it reports with t.Error and returns, never t.Fatal.
func inNS(t *testing.T, ns netns.NsHandle, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netns.Set(ns); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("enter netns: %v", err)
	}
}

func nftList(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", filepath.Base(path), "nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v\n%s", err, out)
	}
	return string(out)
}

func TestInstallRulesetGoldenAndIdempotent(t *testing.T) {
	path, ns := newPodNS(t)
	cfg := goldenConfig(path)
	for i := range 2 { // the second run is an init container restart
		if err := Install(cfg); err != nil {
			t.Fatalf("install #%d: %v", i+1, err)
		}
	}
	got := nftList(t, path)
	golden.Check(t, filepath.Join("testdata", "ruleset.golden"), []byte(got))

	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	rules, err := findRules(nh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || rules[0].Priority != RulePriority {
		t.Errorf("want exactly one fwmark rule at priority %d, got %+v", RulePriority, rules)
	}
	routes, err := nh.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: RouteTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 1 || routes[0].Type != unix.RTN_LOCAL {
		t.Errorf("want one local route in table %d, got %+v", RouteTable, routes)
	}

	if err := Uninstall(cfg); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if got := nftList(t, path); strings.Contains(got, TableName) {
		t.Errorf("table left after uninstall:\n%s", got)
	}
	if rules, _ := findRules(nh, cfg); len(rules) != 0 {
		t.Errorf("rules left after uninstall: %+v", rules)
	}
}

func TestInstallRejectsBadConfig(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"no port":       func(c *Config) { c.Port = 0 },
		"same marks":    func(c *Config) { c.ProxyMark = c.Mark },
		"main table":    func(c *Config) { c.RouteTable = unix.RT_TABLE_MAIN },
		"rule priority": func(c *Config) { c.RulePriority = 0 },
		"node IPv6":     func(c *Config) { c.NodeAddrs = []netip.Addr{netip.MustParseAddr("fc00::3")} },
		"node 4in6":     func(c *Config) { c.NodeAddrs = []netip.Addr{netip.MustParseAddr("::ffff:172.18.0.3")} },
		"node zero":     func(c *Config) { c.NodeAddrs = []netip.Addr{netip.MustParseAddr("0.0.0.0")} },
		"node loopback": func(c *Config) { c.NodeAddrs = []netip.Addr{netip.MustParseAddr("127.0.0.1")} },
		"node invalid":  func(c *Config) { c.NodeAddrs = []netip.Addr{{}} },
		"node repeated": func(c *Config) {
			c.NodeAddrs = []netip.Addr{netip.MustParseAddr(nodeIP), netip.MustParseAddr(nodeIP)}
		},
	} {
		c := DefaultConfig()
		mut(&c)
		if err := Install(c); err == nil {
			t.Errorf("%s: Install accepted %+v", name, c)
		}
	}
}

// waitSynSent waits until a socket in ns is in SYN_SENT towards ip:port, so
// the caller knows the SYN left before anything listens. A dial that ends
// first (sent on done) fails the test with its error.
func waitSynSent(t *testing.T, ns netns.NsHandle, ip string, port uint16, done <-chan error) {
	t.Helper()
	a := net.ParseIP(ip).To4()
	// /proc/net/tcp prints the address as the host-order u32 of the network
	// bytes (little-endian here) and the port in hex; st 02 is SYN_SENT.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var sent bool
		inNS(t, ns, func() {
			b, err := os.ReadFile("/proc/thread-self/net/tcp")
			if err != nil {
				t.Error(err)
				return
			}
			for _, row := range strings.Split(string(b), "\n")[1:] {
				if f := strings.Fields(row); len(f) > 3 && f[2] == want && f[3] == "02" {
					sent = true
				}
			}
		})
		if sent || t.Failed() {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("dial to %s:%d ended before its SYN was seen in flight: %v", ip, port, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no SYN_SENT socket towards %s:%d after 10s", ip, port)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func transparentListen(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp4", addr)
}

func markedDialer(mark int) *net.Dialer {
	return &net.Dialer{Timeout: 300 * time.Millisecond, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark)
		}); err != nil {
			return err
		}
		return serr
	}}
}

// TestCaptureEndToEnd drives real packets through the rules: what the pod
// dials lands on the transparent listener with the original destination as
// its local address; what must not be captured does not.
func TestCaptureEndToEnd(t *testing.T) {
	path, ns := newPodNS(t)
	cfg := DefaultConfig()
	cfg.NetNSPath = path
	if err := Install(cfg); err != nil {
		t.Fatal(err)
	}

	// A connect made before the listener exists is diverted too: with no
	// socket the kernel cannot even answer with a RST (the source would be the
	// non-local VIP), so the SYN is retried and lands once the listener is up.
	// Nothing leaks out of the pod meanwhile.
	early := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			early <- err
			return
		}
		// Long enough for the SYN retransmit that follows the listener (1 s,
		// 3 s, 7 s after the first) on a loaded machine.
		c, err := net.DialTimeout("tcp4", vip+":81", 20*time.Second)
		if err == nil {
			c.Close()
		}
		early <- err
	}()
	// The listener must come after the SYN, or this would test nothing early.
	waitSynSent(t, ns, vip, 81, early)

	var capL, loL net.Listener
	inNS(t, ns, func() {
		var err error
		if capL, err = transparentListen(net.JoinHostPort(Addr, fmt.Sprint(Port))); err != nil {
			t.Errorf("transparent listen: %v", err)
			return
		}
		if loL, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
			t.Error(err)
			return
		}
	})
	if capL == nil || loL == nil {
		return
	}
	defer capL.Close()
	defer loL.Close()
	accepted := acceptAll(capL)

	// Once the listener is bound the kernel completes the early handshake by
	// itself, so the dial may well return (nil) before Accept does: both
	// happen, in either order. Only an error of the dial is a failure.
	select {
	case s := <-accepted:
		if got := s.LocalAddr().String(); got != vip+":81" {
			t.Errorf("early connection restored as %s, want %s:81", got, vip)
		}
		s.Close()
	case <-time.After(25 * time.Second):
		t.Fatal("early connection never reached the listener")
	}
	if err := <-early; err != nil {
		t.Fatalf("early dial: %v", err)
	}

	inNS(t, ns, func() {
		c, err := net.DialTimeout("tcp4", vip+":80", 2*time.Second)
		if err != nil {
			t.Errorf("captured dial: %v", err)
			return
		}
		defer c.Close()
		select {
		case s := <-accepted:
			defer s.Close()
			if got := s.LocalAddr().String(); got != vip+":80" {
				t.Errorf("listener saw local address %s, want the restored %s:80", got, vip)
			}
			if got := s.RemoteAddr().(*net.TCPAddr).IP.String(); got != podIP {
				t.Errorf("listener saw peer %s, want the pod %s", got, podIP)
			}
			// Bytes flow both ways over the captured connection.
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Error(err)
				return
			}
			buf := make([]byte, 4)
			s.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := s.Read(buf); err != nil || string(buf) != "ping" {
				t.Errorf("server read %q, %v", buf, err)
			}
			if _, err := s.Write([]byte("pong")); err != nil {
				t.Error(err)
				return
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Read(buf); err != nil || string(buf) != "pong" {
				t.Errorf("client read %q, %v", buf, err)
			}
		case <-time.After(2 * time.Second):
			t.Error("capture listener accepted nothing")
		}

		// DNS over TCP and traffic carrying the proxy's mark leave the pod
		// untouched (here: into the void, so they time out).
		if _, err := net.DialTimeout("tcp4", vip+":53", 300*time.Millisecond); err == nil {
			t.Error("dial to port 53 succeeded; it must not be captured")
		}
		if _, err := markedDialer(int(ProxyMark)).Dial("tcp4", vip+":80"); err == nil {
			t.Error("dial with the proxy mark succeeded; it must not be captured")
		}
		// Loopback reaches its own listener, not the capture.
		lc, err := net.DialTimeout("tcp4", loL.Addr().String(), time.Second)
		if err != nil {
			t.Errorf("loopback dial: %v", err)
		} else {
			lc.Close()
		}
	})
	select {
	case c, ok := <-accepted:
		if ok {
			t.Errorf("capture listener accepted an uncaptured connection to %s", c.LocalAddr())
			c.Close()
		}
	case <-time.After(200 * time.Millisecond):
	}
}

// acceptAll hands every connection l accepts to the channel it returns, which
// closes once l does.
func acceptAll(l net.Listener) <-chan net.Conn {
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	return accepted
}

// newPeerNS makes another host on the pod's link: the pod netns' void0 moves
// into a new netns and takes the gateway's address there.
func newPeerNS(t *testing.T, pod netns.NsHandle) *netnstest.NS {
	t.Helper()
	peer := netnstest.New(t)
	nh, err := netlink.NewHandleAt(pod)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	v, err := nh.LinkByName("void0")
	if err != nil {
		t.Fatal(err)
	}
	if err := nh.LinkSetNsFd(v, peer.Fd()); err != nil {
		t.Fatalf("move void0: %v", err)
	}
	ph, err := netlink.NewHandleAt(netns.NsHandle(peer.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer ph.Close()
	if v, err = ph.LinkByName("void0"); err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr("10.244.0.1/24")
	if err := ph.AddrAdd(v, addr); err != nil {
		t.Fatal(err)
	}
	if err := ph.LinkSetUp(v); err != nil {
		t.Fatal(err)
	}
	return peer
}

// TestCapturePortClosedToOtherHosts: TCP to <podIP>:Port from another host is
// reset by the pod's capture even when the listener binds every address (as a
// proxy that binds 0.0.0.0 would), and the pod's own diverted connections still
// reach it. Accepted, such a connection would be restored as <podIP>:Port and
// passed through from the node back into the same listener, without end.
func TestCapturePortClosedToOtherHosts(t *testing.T) {
	path, ns := newPodNS(t)
	cfg := DefaultConfig()
	cfg.NetNSPath = path
	if err := Install(cfg); err != nil {
		t.Fatal(err)
	}
	peer := newPeerNS(t, ns)
	var capL net.Listener
	inNS(t, ns, func() {
		var err error
		if capL, err = transparentListen(fmt.Sprintf("0.0.0.0:%d", Port)); err != nil {
			t.Errorf("transparent listen: %v", err)
		}
	})
	if capL == nil {
		return
	}
	defer capL.Close()
	accepted := acceptAll(capL)

	target := net.JoinHostPort(podIP, fmt.Sprint(Port))
	err := peer.Do(func() error {
		c, err := net.DialTimeout("tcp4", target, 3*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial of %s from another host: %v; want ECONNREFUSED (reset in the pod)", target, err)
	}

	inNS(t, ns, func() {
		c, err := net.DialTimeout("tcp4", vip+":80", 2*time.Second)
		if err != nil {
			t.Errorf("captured dial: %v", err)
			return
		}
		c.Close()
	})
	select {
	case s := <-accepted:
		if got := s.LocalAddr().String(); got != vip+":80" {
			t.Errorf("listener accepted %s first, want only the captured %s:80", got, vip)
		}
		s.Close()
	case <-time.After(2 * time.Second):
		t.Fatal("capture listener accepted nothing from the pod")
	}
	select {
	case s, ok := <-accepted:
		if ok {
			t.Errorf("capture listener accepted %s from %s", s.LocalAddr(), s.RemoteAddr())
			s.Close()
		}
	case <-time.After(200 * time.Millisecond):
	}
}

func TestWaitForListener(t *testing.T) {
	_, ns := newPodNS(t)
	port := uint16(18001)

	// Times out, with a clear error, while nothing listens.
	inNS(t, ns, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := WaitForListener(ctx, port, 20*time.Millisecond, nil)
		if err == nil || !strings.Contains(err.Error(), "no listener on port 18001") {
			t.Errorf("want a timeout error, got %v", err)
		}
	})

	// Returns once a listener appears, not before.
	waitDone := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			waitDone <- err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		waitDone <- WaitForListener(ctx, port, 20*time.Millisecond, nil)
	}()
	select {
	case err := <-waitDone:
		t.Fatalf("returned before any listener: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// A listener in the host namespace on the same port must not count.
	if hostL, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		defer hostL.Close()
		select {
		case err := <-waitDone:
			t.Fatalf("a host-netns listener satisfied the wait: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	var l net.Listener
	inNS(t, ns, func() {
		var err error
		if l, err = net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", port)); err != nil {
			t.Error(err)
			return
		}
	})
	if l == nil {
		return
	}
	defer l.Close()
	select {
	case err := <-waitDone:
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not notice the listener")
	}
}

// TestInboundRepliesNotCaptured: a meshed pod still serves. Its replies to a
// peer outside belong to flows tracked in the reply direction and must leave
// through eth0, not be diverted to the capture listener.
func TestInboundRepliesNotCaptured(t *testing.T) {
	path, ns := newPodNS(t)
	outside := newPeerNS(t, ns)

	cfg := DefaultConfig()
	cfg.NetNSPath = path
	if err := Install(cfg); err != nil {
		t.Fatal(err)
	}
	// Both a capture listener and an app server exist in the pod.
	var capL, appL net.Listener
	inNS(t, ns, func() {
		var err error
		if capL, err = transparentListen(net.JoinHostPort(Addr, fmt.Sprint(Port))); err != nil {
			t.Error(err)
			return
		}
		if appL, err = net.Listen("tcp4", "0.0.0.0:0"); err != nil {
			t.Error(err)
		}
	})
	if capL == nil || appL == nil {
		return
	}
	defer capL.Close()
	defer appL.Close()
	go func() {
		c, err := appL.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 5)
		if _, err := c.Read(buf); err == nil {
			_, _ = c.Write(buf)
		}
	}()
	port := appL.Addr().(*net.TCPAddr).Port
	if err := outside.Do(func() error {
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", podIP, port), 2*time.Second)
		if err != nil {
			return fmt.Errorf("dial the pod's server from outside: %w", err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("hello")); err != nil {
			return err
		}
		buf := make([]byte, 5)
		if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
			return fmt.Errorf("echo from the pod: %q, %v", buf, err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// BenchmarkInstall measures one init container run's programming (the
// re-install path: table replaced, rule and route kept).
func BenchmarkInstall(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	n := netnstest.New(b)
	cfg := DefaultConfig()
	cfg.NetNSPath = n.Path()
	for b.Loop() {
		if err := Install(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// TestInstallInOwnNamespace is the init container's path: no -netns, so
// Install opens plain sockets where it runs (no setns, hence no CAP_SYS_ADMIN)
// and must program the same ruleset as the path-addressed install.
func TestInstallInOwnNamespace(t *testing.T) {
	path, ns := newPodNS(t)
	var installErr error
	inNS(t, ns, func() { installErr = Install(goldenConfig("")) })
	if installErr != nil {
		t.Fatalf("install in own netns: %v", installErr)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "ruleset.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if got := nftList(t, path); got != string(want) {
		t.Errorf("own-netns install differs from the golden ruleset:\n--- got\n%s--- want\n%s", got, want)
	}
	host, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables (host): %v\n%s", err, host)
	}
	if strings.Contains(string(host), TableName) {
		t.Errorf("install leaked into the test's own netns:\n%s", host)
	}
}
