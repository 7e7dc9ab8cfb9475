package refuse

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// vip stands for a ClusterIP: an address on the namespace's lo with real
// listeners, so a refusal cannot be mistaken for "nothing listens".
var vip = netip.MustParseAddr("10.96.0.10")

type pod struct {
	ns  *netnstest.NS
	nft *nftables.Conn
}

func newPod(t testing.TB) *pod {
	t.Helper()
	ns := netnstest.New(t)
	ns.LoopbackAddr(t, vip)
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd()), nftables.AsLasting())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseLasting() })
	return &pod{ns: ns, nft: c}
}

// listen opens a listener on vip:port inside the pod; accepted counts what it accepts.
func (p *pod) listen(t testing.TB, port uint16) (accepted func() int) {
	t.Helper()
	var l net.Listener
	if err := p.ns.Do(func() (err error) {
		l, err = net.Listen("tcp", netip.AddrPortFrom(vip, port).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return countAccepts(l)
}

// countAccepts accepts on l until it closes; accepted counts what it accepted.
func countAccepts(l net.Listener) (accepted func() int) {
	n := make(chan int, 1)
	n <- 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
			n <- <-n + 1
		}
	}()
	return func() int { v := <-n; n <- v; return v }
}

func (p *pod) dial(to netip.AddrPort) error {
	return p.ns.Do(func() error {
		c, err := net.DialTimeout("tcp", to.String(), 2*time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
}

// TestRefusedBeforeAccept: a SYN to a destination in the set is answered
// with a reset before any socket sees it (connect: ECONNREFUSED although a
// listener is there), counted under that destination; the destination
// leaving the set connects again.
func TestRefusedBeforeAccept(t *testing.T) {
	p := newPod(t)
	refused, open := netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(vip, 81)
	acceptedRefused, acceptedOpen := p.listen(t, 80), p.listen(t, 81)
	if err := Install(p.nft, Sets{NoEndpoints: []netip.AddrPort{refused}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := p.dial(refused); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want ECONNREFUSED", refused, err)
		}
	}
	if err := p.dial(open); err != nil {
		t.Fatalf("dial %s (not in the set): %v", open, err)
	}
	got, err := Counts(p.nft)
	if err != nil {
		t.Fatal(err)
	}
	if counts := got.NoEndpoints; counts[refused] != 3 || len(counts) != 1 || len(got.NotDeclared) != 0 {
		t.Errorf("counts %v, want %s: 3", counts, refused)
	}
	if err := Update(p.nft, Sets{}, Sets{NoEndpoints: []netip.AddrPort{refused}}); err != nil {
		t.Fatal(err)
	}
	if err := p.dial(refused); err != nil {
		t.Fatalf("dial %s after it left the set: %v", refused, err)
	}
	waitFor(t, func() bool { return acceptedRefused() == 1 && acceptedOpen() == 1 },
		"the listeners accept exactly the connections not refused")
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestUpdateCost measures what keeping the set costs the agent: one Service
// emptying (or filling) is one transaction in every meshed pod's netns of
// the node. SVCLB_PEER_REFUSE_PODS (default 20) pods; docs/peer.md has the
// numbers measured with 100.
func TestUpdateCost(t *testing.T) {
	n := 20
	if v := os.Getenv("SVCLB_PEER_REFUSE_PODS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			t.Fatal(err)
		}
	}
	pods := make([]*pod, n)
	for i := range pods {
		pods[i] = newPod(t)
		if err := Install(pods[i].nft, Sets{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := []netip.AddrPort{netip.AddrPortFrom(vip, 80)}
	const rounds = 20
	var per []time.Duration
	var fan []time.Duration
	for r := range rounds {
		t0 := time.Now()
		for _, p := range pods {
			t1 := time.Now()
			var err error
			if r%2 == 0 {
				err = Update(p.nft, Sets{NoEndpoints: svc}, Sets{})
			} else {
				err = Update(p.nft, Sets{}, Sets{NoEndpoints: svc})
			}
			if err != nil {
				t.Fatal(err)
			}
			per = append(per, time.Since(t1))
		}
		fan = append(fan, time.Since(t0))
	}
	slices.Sort(per)
	slices.Sort(fan)
	q := func(d []time.Duration, f float64) time.Duration { return d[int(f*float64(len(d)-1))] }
	t.Logf("%d pods: one netns update p50 %v p99 %v; one Service change on the node (all pods) p50 %v max %v",
		n, q(per, .5), q(per, .99), q(fan, .5), fan[len(fan)-1])
}

// TestConnectCost measures what the rule adds to a connection that is not
// refused: connect+close to a listener in the pod, without the table and with
// it holding 1000 refused destinations (the rule looks up SYNs only).
func TestConnectCost(t *testing.T) {
	p := newPod(t)
	p.listen(t, 80)
	to := netip.AddrPortFrom(vip, 80)
	const n = 2000
	measure := func() time.Duration {
		var total time.Duration
		if err := p.ns.Do(func() error {
			for range n {
				t0 := time.Now()
				c, err := net.Dial("tcp", to.String())
				if err != nil {
					return err
				}
				total += time.Since(t0)
				_ = c.Close()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return total / n
	}
	without := measure()
	var many []netip.AddrPort
	for i := range 1000 {
		many = append(many, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)}), 80))
	}
	if err := Install(p.nft, Sets{NoEndpoints: many}); err != nil {
		t.Fatal(err)
	}
	with := measure()
	t.Logf("connect to a destination not refused, mean of %d: %v without the table, %v with 1000 refused destinations", n, without, with)
}
