package kubeproxyguard

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// A cut element (verdict continue) routes nothing: a connection to the VIP
// meets exactly what it meets with the element deleted (the guard's old
// cut), kube-proxy's cluster-ips-check REJECT, and not what kube-proxy's
// element does (DNAT to an endpoint, or drop). In the kernel a vmap lookup
// that yields continue and one that misses (break) both go on to the
// chain's next rule (net/netfilter/nf_tables_core.c nft_do_chain).
func TestCutRoutesNothing(t *testing.T) {
	demo, remote := svc("default/demo"), svc("default/remote-only")
	vips := map[types.NamespacedName]string{
		demo:   "10.96.100.100:80", // service-ips: goto service-… (DNAT to 10.244.x)
		remote: "10.96.50.50:9000", // no-endpoint-services: drop
	}
	outcomes := func(ns *netnstest.NS) map[types.NamespacedName]string {
		r := map[types.NamespacedName]string{}
		for s, vip := range vips {
			r[s] = dial(t, ns, vip)
		}
		return r
	}

	ns := routedNS(t)
	kubeProxy := outcomes(ns)

	deleted := routedNS(t)
	nft(t, deleted, "delete", "element", "ip", TableName, serviceIPsMap, "{ 10.96.100.100 . tcp . 80 }")
	nft(t, deleted, "delete", "element", "ip", TableName, noEndpointServicesMap, "{ 10.96.50.50 . tcp . 9000 }")

	g, err := New(Options{NetNS: ns.Fd(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.SetServices([]types.NamespacedName{demo, remote})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.DeleteNow(ctx); err != nil {
		t.Fatal(err)
	}
	cut, gone := outcomes(ns), outcomes(deleted)
	for s := range vips {
		t.Logf("%s: kube-proxy's element: %s; deleted: %s; cut: %s", s, kubeProxy[s], gone[s], cut[s])
		if gone[s] != refused {
			t.Errorf("%s with the element deleted: %s, want %s (cluster-ips-check)", s, gone[s], refused)
		}
		if cut[s] != gone[s] {
			t.Errorf("%s cut: %s, want %s as with the element deleted", s, cut[s], gone[s])
		}
		if kubeProxy[s] == gone[s] {
			t.Errorf("%s: kube-proxy's element gives %s too: the test tells nothing", s, kubeProxy[s])
		}
	}
}

const refused = "refused"

// routedNS is a namespace with kube-proxy-v1.34.nft loaded, lo up, and the
// Service and pod ranges routed into one end of a veth pair whose other end
// answers nothing (no address; ARP for the pod IP goes unanswered).
func routedNS(t *testing.T) *netnstest.NS {
	t.Helper()
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"addr", "add", "192.0.2.1/24", "dev", "v0"},
		{"link", "set", "v0", "up"},
		{"link", "set", "v1", "up"},
		{"route", "add", "10.96.0.0/12", "dev", "v0"},
		{"route", "add", "10.244.0.0/16", "dev", "v0"},
	} {
		if out, err := ns.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	return ns
}

// dial connects to addr from inside ns: "refused" (a REJECT's ICMP or RST),
// "timeout" (the SYN went to the veth, or was dropped),
// "connected", or the error.
func dial(t *testing.T, ns *netnstest.NS, addr string) string {
	t.Helper()
	var r string
	if err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		var ne net.Error
		switch {
		case err == nil:
			_ = c.Close()
			r = "connected"
		case errors.Is(err, syscall.ECONNREFUSED):
			r = refused
		case errors.As(err, &ne) && ne.Timeout():
			r = "timeout"
		default:
			r = err.Error()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return r
}
