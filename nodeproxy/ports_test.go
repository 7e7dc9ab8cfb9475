package nodeproxy

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/internal/translate/translatetest"
	"github.com/aether-mesh/svclb/nodeproxy/internal/netnsbind"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestSvcUpstreamSharesThePodsPorts: a svc: upstream, opened in the pod's
// netns and bound to 0.0.0.0:0, takes its source port at connect, for its own
// 4-tuple (IP_BIND_ADDRESS_NO_PORT, translate.SvcUpstreamBindConfig), so it
// never competes with the pod's connections to the VIP for the ephemeral range.
// Bound without it, each upstream holds a port of the range exclusively from
// bind(2) on: the pod's range of 8 ports then carries 4 connections through
// the proxy, not 6, and at scale the range runs out within a minute of
// TIME_WAIT.
func TestSvcUpstreamSharesThePodsPorts(t *testing.T) {
	pp := newPodPair(t)
	run(t, "ip", "netns", "exec", pp.clientPath[strings.LastIndex(pp.clientPath, "/")+1:],
		"sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=41000 41007")
	// A backend that says hello and holds each connection until the client closes it.
	backend := netip.AddrPortFrom(pp.backend.Addr(), 8081)
	l, err := netnsbind.Listen(context.Background(), pp.serverPath, backend, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "hello %s\n", c.RemoteAddr())
				c.Read(make([]byte, 1)) //nolint:errcheck // until the client's close
			}()
		}
	}()
	a := startAgent(t)
	vip := netip.MustParseAddrPort("10.96.7.11:80")
	svc, stat := clusterOf(vip), contract.StatName("default", "held", vip.Port())
	a.set(t, "1", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {captureListener(translate.CapturedPod{Namespace: "default", Name: "client", NetnsPath: pp.clientPath}, translatetest.Options(true, true))},
		resourcev3.ClusterType:  {translate.PassthroughOriginalDst(), translate.Blackhole(), translate.Cluster(svc, stat, false)},
		resourcev3.EndpointType: {loadAssignment(svc, []netip.AddrPort{backend})},
	})
	p := startProxy(t, a.sock)
	adstest.Eventually(t, "capture listener bound in the pod netns", func() bool { return len(activeListeners(p)) == 1 && p.ready.Load() })

	const held = 6 // more than half the pod's 8 ports
	for i := range held {
		c, err := dialIn(pp.clientPath, vip.String())
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, held, err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
		line, err := bufio.NewReader(c).ReadString('\n')
		if want := "hello " + pp.clientIP + ":"; !strings.HasPrefix(line, want) {
			t.Fatalf("connection %d of %d, with %d held: got %q (%v), want a line starting %q; %s = %d",
				i+1, held, i, line, err, want, clusterStat(stat, "upstream_cx_connect_fail"), p.stats.value(clusterStat(stat, "upstream_cx_connect_fail")))
		}
	}
	if got := p.stats.value(clusterStat(stat, "upstream_cx_connect_fail")); got != 0 {
		t.Errorf("%s = %d, want 0", clusterStat(stat, "upstream_cx_connect_fail"), got)
	}
}
