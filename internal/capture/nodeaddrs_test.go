package capture

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// TestNodeAddrsNotCaptured drives real packets: TCP to one of the node's addresses leaves the pod
// uncaptured and reaches the node from the pod's own address (what a NodePort, a hostPort or a
// hostNetwork pod of the pod's node needs), while TCP to any other address is still diverted to
// the capture listener. A capture changed by the pod (a later route chain that marks TCP to the
// node's address, as leg hostile-steer does) still brings it to the listener, whose cap_refused
// closes it.
func TestNodeAddrsNotCaptured(t *testing.T) {
	path, ns := newPodNS(t)
	node := newPeerNS(t, ns)
	holdAddr(t, node, nodeIP+"/32")
	if err := Install(goldenConfig(path)); err != nil {
		t.Fatal(err)
	}

	var capL, nodeL net.Listener
	inNS(t, ns, func() {
		var err error
		if capL, err = transparentListen(net.JoinHostPort(Addr, fmt.Sprint(Port))); err != nil {
			t.Errorf("transparent listen: %v", err)
		}
	})
	if err := node.Do(func() error {
		var err error
		nodeL, err = net.Listen("tcp4", nodeIP+":0")
		return err
	}); err != nil {
		t.Fatalf("listen on the node's address: %v", err)
	}
	if capL == nil {
		return
	}
	defer capL.Close()
	defer nodeL.Close()
	captured, atNode := acceptAll(capL), acceptAll(nodeL)
	nodePort := nodeL.Addr().(*net.TCPAddr).Port

	dial := func(to string) {
		t.Helper()
		inNS(t, ns, func() {
			c, err := net.DialTimeout("tcp4", to, 3*time.Second)
			if err != nil {
				t.Errorf("dial %s from the pod: %v", to, err)
				return
			}
			c.Close()
		})
	}
	accepted := func(ch <-chan net.Conn) (net.Conn, bool) {
		select {
		case c, ok := <-ch:
			return c, ok
		case <-time.After(3 * time.Second):
			return nil, false
		}
	}

	// The node's address: the node accepts it from the pod's address; the capture sees nothing.
	dial(net.JoinHostPort(nodeIP, fmt.Sprint(nodePort)))
	if c, ok := accepted(atNode); !ok {
		t.Errorf("the node never saw the pod's connection to %s:%d", nodeIP, nodePort)
	} else {
		if got := c.RemoteAddr().(*net.TCPAddr).IP.String(); got != podIP {
			t.Errorf("the node saw the connection from %s, want the pod's own %s", got, podIP)
		}
		c.Close()
	}
	select {
	case c := <-captured:
		t.Errorf("the capture diverted a connection to the node's address (%s)", c.LocalAddr())
		c.Close()
	case <-time.After(200 * time.Millisecond):
	}

	// Any other address is captured as before.
	dial(vip + ":80")
	if c, ok := accepted(captured); !ok {
		t.Errorf("a connection to %s:80 was not captured", vip)
	} else {
		if got := c.LocalAddr().String(); got != vip+":80" {
			t.Errorf("capture listener accepted %s, want %s:80", got, vip)
		}
		c.Close()
	}

	// Steered at the node's address, the connection reaches the listener again, not the node.
	rules := fmt.Sprintf(`table ip steer {
	chain output {
		type route hook output priority mangle + 1; policy accept;
		ip daddr %s tcp dport %d meta mark set %#x
	}
}
`, nodeIP, nodePort, Mark)
	cmd := exec.Command("ip", "netns", "exec", filepath.Base(path), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("steer: %v\n%s", err, out)
	}
	dial(net.JoinHostPort(nodeIP, fmt.Sprint(nodePort)))
	if c, ok := accepted(captured); !ok {
		t.Errorf("a steered connection to the node's address did not reach the capture listener")
	} else {
		if got := c.LocalAddr().String(); got != net.JoinHostPort(nodeIP, fmt.Sprint(nodePort)) {
			t.Errorf("capture listener accepted %s, want the steered %s:%d", got, nodeIP, nodePort)
		}
		c.Close()
	}
	select {
	case c := <-atNode:
		t.Errorf("the steered connection reached the node from %s", c.RemoteAddr())
		c.Close()
	case <-time.After(200 * time.Millisecond):
	}
}

// holdAddr adds cidr to the loopback of n: n answers for it on every interface.
func holdAddr(t *testing.T, n *netnstest.NS, cidr string) {
	t.Helper()
	nh, err := netlink.NewHandleAt(netns.NsHandle(n.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	lo, err := nh.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	if err := nh.AddrAdd(lo, a); err != nil {
		t.Fatalf("add %s: %v", cidr, err)
	}
}

func TestParseNodeAddrs(t *testing.T) {
	for in, want := range map[string][]string{
		"":                                 nil,
		"172.18.0.3":                       {"172.18.0.3"},
		"172.18.0.3,fc00:f853:ccd:e793::3": {"172.18.0.3"},
		"fc00::3,10.0.0.1,192.168.9.1":     {"10.0.0.1", "192.168.9.1"},
		"fc00::3":                          nil,
	} {
		got, err := ParseNodeAddrs(in)
		if err != nil {
			t.Errorf("ParseNodeAddrs(%q): %v", in, err)
			continue
		}
		var ws []netip.Addr
		for _, w := range want {
			ws = append(ws, netip.MustParseAddr(w))
		}
		if !slices.Equal(got, ws) {
			t.Errorf("ParseNodeAddrs(%q) = %v, want %v", in, got, ws)
		}
	}
	for _, in := range []string{
		"172.18.0.3,", ",172.18.0.3", "172.18.0.3, 10.0.0.1", " 172.18.0.3", "172.18.0.3/32", "node-a",
		"127.0.0.1", "0.0.0.0", "169.254.169.254", "224.0.0.1", "255.255.255.255", "::ffff:172.18.0.3",
		"172.18.0.3,172.18.0.3", "$(SVCLB_NODE_IPS)",
	} {
		if got, err := ParseNodeAddrs(in); err == nil {
			t.Errorf("ParseNodeAddrs(%q) = %v, want an error", in, got)
		}
	}
}
