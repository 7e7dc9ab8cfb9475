package nodeproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// testDrainTime is the drain time of the drain tests: long enough to see a
// drained connection still work, short enough to wait for its end.
const testDrainTime = 600 * time.Millisecond

// chainB is a second Service chain the drain tests add next to cap_svc.
const chainB = "cap_svc_b"

var (
	vipA = netip.MustParseAddr("127.0.0.1")
	vipB = netip.MustParseAddr("127.0.0.2")
)

// twoChains makes the agent's listener listen on 0.0.0.0:port with two
// Service chains: cap_svc for vipA and chainB, a copy of cap_svc with its
// own stat prefix and idle timeout idleB, for vipB. A connection to vipA and
// one to vipB then run on different filter chains of one listener.
func twoChains(port uint16, idleB time.Duration) listenerMut {
	return func(l *listenerv3.Listener) {
		onLoopback(netip.AddrPortFrom(netip.IPv4Unspecified(), port))(l)
		b := proto.Clone(chain(l, contract.ChainSvc)).(*listenerv3.FilterChain)
		b.Name = chainB
		fs := b.Filters
		var tp tcpproxyv3.TcpProxy
		if err := fs[len(fs)-1].GetTypedConfig().UnmarshalTo(&tp); err != nil {
			panic(err)
		}
		tp.StatPrefix, tp.IdleTimeout = chainB, durationpb.New(idleB)
		fs[len(fs)-1].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(&tp)}
		l.FilterChains = append(l.FilterChains, b)
		setRanges(l, map[string][]netip.Prefix{
			contract.ChainSvc: {netip.PrefixFrom(vipA, 32)},
			chainB:            {netip.PrefixFrom(vipB, 32)},
		})
	}
}

// setRanges replaces the listener's destination IP matcher: each chain
// takes its prefixes.
func setRanges(l *listenerv3.Listener, byChain map[string][]netip.Prefix) {
	tree := l.GetFilterChainMatcher().GetMatcherTree()
	var ipm matcherv3.IPMatcher
	if err := tree.GetCustomMatch().GetTypedConfig().UnmarshalTo(&ipm); err != nil {
		panic(err)
	}
	ipm.RangeMatchers = nil
	for _, name := range []string{contract.ChainSvc, chainB} {
		var ranges []*xdscorev3.CidrRange
		for _, p := range byChain[name] {
			ranges = append(ranges, &xdscorev3.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))})
		}
		if len(ranges) == 0 {
			continue
		}
		ipm.RangeMatchers = append(ipm.RangeMatchers, &matcherv3.IPMatcher_IPRangeMatcher{Ranges: ranges,
			OnMatch: &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{Action: &xdscorev3.TypedExtensionConfig{
				Name: name, TypedConfig: mustAny(wrapperspb.String(name))}}}})
	}
	tree.GetCustomMatch().TypedConfig = mustAny(&ipm)
}

// drainProxy starts a proxy with testDrainTime whose listener (on
// 0.0.0.0:port) is the agent's, changed by twoChains(port, time.Hour), with
// a cluster and a backend for each of vipA:port and vipB:port. freePort only
// finds a port that was free a moment ago: any socket of a parallel test (an
// ephemeral client port) may take it before the proxy binds, so a lost race
// (EADDRINUSE) starts over on another port.
func drainProxy(t *testing.T) (*Proxy, uint16) {
	t.Helper()
	for try := 1; ; try++ {
		p, port, err := tryDrainProxy(t)
		if err == nil {
			return p, port
		}
		p.closeAll()
		if !errors.Is(err, syscall.EADDRINUSE) || try == 5 {
			t.Fatal(err)
		}
	}
}

func tryDrainProxy(t *testing.T) (*Proxy, uint16, error) {
	p := New(Options{DrainTime: testDrainTime})
	t.Cleanup(p.closeAll)
	port := freePort(t).Port()
	var cls []*clusterv3.Cluster
	var loads []*endpointv3.ClusterLoadAssignment
	for _, vip := range []netip.Addr{vipA, vipB} {
		name := clusterOf(netip.AddrPortFrom(vip, port))
		cls = append(cls, translate.Cluster(name, localStat, false))
		loads = append(loads, loadAssignment(name, []netip.AddrPort{echoServer(t, vip.String())}))
	}
	if err := p.applyClusters(append(cls, translate.PassthroughOriginalDst()), nil); err != nil {
		t.Fatal(err)
	}
	if err := p.applyAssignments(loads, nil); err != nil {
		t.Fatal(err)
	}
	l := captureListener(localPod, loopbackOptions(false), twoChains(port, time.Hour))
	return p, port, p.applyListeners(context.Background(), []*listenerv3.Listener{l}, nil)
}

// update applies the agent's listener of localPod (Phase 1) changed by muts.
func update(t *testing.T, p *Proxy, muts ...listenerMut) {
	t.Helper()
	l := captureListener(localPod, loopbackOptions(false), muts...)
	if err := p.applyListeners(context.Background(), []*listenerv3.Listener{l}, nil); err != nil {
		t.Fatal(err)
	}
}

// open connects to vip:port and reads the backend's greeting.
func open(t *testing.T, vip netip.Addr, port uint16) net.Conn {
	t.Helper()
	c, err := dialTCP(netip.AddrPortFrom(vip, port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if got := readLine(t, c); got != vip.String() {
		t.Fatalf("connection to %s greeted by %q", vip, got)
	}
	return c
}

func readLine(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	b := make([]byte, 0, 32)
	one := make([]byte, 1)
	for {
		if _, err := c.Read(one); err != nil {
			return string(b) + "<" + err.Error() + ">"
		}
		if one[0] == '\n' {
			return string(b)
		}
		b = append(b, one[0])
	}
}

// alive reports whether c still carries bytes both ways (the echo answers).
func alive(t *testing.T, c net.Conn) bool {
	t.Helper()
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return false
	}
	return readLine(t, c) == "ping"
}

// closedWithin waits up to d for the proxy to close c and reports when it did.
func closedWithin(c net.Conn, d time.Duration) (time.Time, bool) {
	c.SetReadDeadline(time.Now().Add(d)) //nolint:errcheck
	_, err := io.Copy(io.Discard, c)
	return time.Now(), closed(err)
}

func gauge(p *Proxy, name string) int64 { return p.serverGauges()[name] }

// TestInPlaceUpdateDrainsOnlyChangedChains: an update that changes one
// filter chain is in place (listener_in_place_updated); the connection on
// the changed chain keeps working until the drain time has passed, then is
// closed; the one on the unchanged chain keeps running; a matcher-only change
// (a Service range change) drains nothing.
func TestInPlaceUpdateDrainsOnlyChangedChains(t *testing.T) {
	p, port := drainProxy(t)
	a, b := open(t, vipA, port), open(t, vipB, port)

	start := time.Now()
	update(t, p, twoChains(port, 2*time.Hour)) // chainB's tcp_proxy changes, cap_svc does not
	if v := p.stats.value(statListenerInPlace); v != 1 {
		t.Fatalf("listener_in_place_updated = %d, want 1", v)
	}
	if g := gauge(p, "listener_manager.total_filter_chains_draining"); g != 1 {
		t.Fatalf("total_filter_chains_draining = %d, want 1", g)
	}
	// tcp_proxy is not drained gracefully: the connection works on meanwhile.
	if !alive(t, b) || !alive(t, a) {
		t.Fatal("a connection broke at the update itself")
	}
	at, ok := closedWithin(b, 10*time.Second)
	if d := at.Sub(start); !ok || d < testDrainTime {
		t.Fatalf("connection on the changed chain: closed=%v after %v, want a close after the drain time %v", ok, d, testDrainTime)
	}
	adstest.Eventually(t, "drain end", func() bool { return gauge(p, "listener_manager.total_filter_chains_draining") == 0 })
	if !alive(t, a) {
		t.Fatal("the connection on the unchanged chain was closed by the drain")
	}
	// New connections use the new chain.
	open(t, vipB, port)

	// Only the matcher changes: no chain is drained.
	update(t, p, twoChains(port, 2*time.Hour), func(l *listenerv3.Listener) {
		setRanges(l, map[string][]netip.Prefix{contract.ChainSvc: {netip.PrefixFrom(vipA, 32), netip.MustParsePrefix("10.0.0.0/8")},
			chainB: {netip.PrefixFrom(vipB, 32)}})
	})
	if v, g := p.stats.value(statListenerInPlace), gauge(p, "listener_manager.total_filter_chains_draining"); v != 2 || g != 0 {
		t.Fatalf("matcher-only change: listener_in_place_updated %d (want 2), total_filter_chains_draining %d (want 0)", v, g)
	}
	if _, ok := closedWithin(a, 2*testDrainTime); ok || !alive(t, a) {
		t.Fatal("a matcher-only change closed a connection whose chain it kept")
	}
}

// TestFullUpdateDrainsEveryChain: a change outside the filter chains, or a
// new version without filter_chains, is a full listener update: the socket
// is kept, but every connection of the old version drains, unchanged chains
// included (total_listeners_draining, /config_dump draining_state).
func TestFullUpdateDrainsEveryChain(t *testing.T) {
	for name, mut := range map[string]listenerMut{
		"traffic_direction": func(l *listenerv3.Listener) { l.TrafficDirection = corev3.TrafficDirection_OUTBOUND },
		// The agent's listener before the Service range is known: only the default chain.
		"no filter_chains": func(l *listenerv3.Listener) { l.FilterChains, l.FilterChainMatcher = nil, nil },
	} {
		t.Run(name, func(t *testing.T) {
			p, port := drainProxy(t)
			a := open(t, vipA, port)
			start := time.Now()
			update(t, p, twoChains(port, time.Hour), mut)
			if m, ip := p.stats.value(statListenerModified), p.stats.value(statListenerInPlace); m != 1 || ip != 0 {
				t.Fatalf("listener_modified %d (want 1), listener_in_place_updated %d (want 0)", m, ip)
			}
			if g := gauge(p, "listener_manager.total_listeners_draining"); g != 1 {
				t.Fatalf("total_listeners_draining = %d, want 1", g)
			}
			if ld := listenersDump(p); ld[localListener].GetDrainingState() == nil || ld[localListener].GetActiveState() == nil {
				t.Fatalf("/config_dump: want active and draining states, got %v", ld[localListener])
			}
			if !alive(t, a) {
				t.Fatal("the connection broke at the update itself")
			}
			at, ok := closedWithin(a, 10*time.Second)
			if d := at.Sub(start); !ok || d < testDrainTime {
				t.Fatalf("closed=%v after %v, want a close after the drain time %v", ok, d, testDrainTime)
			}
			adstest.Eventually(t, "drain end", func() bool {
				return gauge(p, "listener_manager.total_listeners_draining") == 0 && listenersDump(p)[localListener].GetDrainingState() == nil
			})
		})
	}
}

// TestListenerRemovalDrains: removing a listener closes its socket at once;
// its established connections work until the drain time has passed, then
// are closed (Envoy drains, it neither cuts at once nor keeps them forever).
func TestListenerRemovalDrains(t *testing.T) {
	p, port := drainProxy(t)
	a := open(t, vipA, port)
	start := time.Now()
	if err := p.applyListeners(context.Background(), nil, []string{localListener}); err != nil {
		t.Fatal(err)
	}
	if _, err := dialTCP(netip.AddrPortFrom(vipA, port)); err == nil {
		t.Fatal("removed listener still accepts")
	}
	if p.stats.value(statListenerRemoved) != 1 || gauge(p, "listener_manager.total_listeners_draining") != 1 {
		t.Fatalf("stats after removal:\n%s", statsText(p))
	}
	if !alive(t, a) {
		t.Fatal("established connection broken by the removal itself")
	}
	at, ok := closedWithin(a, 10*time.Second)
	if d := at.Sub(start); !ok || d < testDrainTime {
		t.Fatalf("closed=%v after %v, want a close after the drain time %v", ok, d, testDrainTime)
	}
	adstest.Eventually(t, "drain end", func() bool { return gauge(p, "listener_manager.total_listeners_draining") == 0 })
}

// TestUnchangedListenerIsNotUpdated: an LDS update equal to the active
// listener changes nothing (Envoy blocks an update with the same hash).
func TestUnchangedListenerIsNotUpdated(t *testing.T) {
	p, port := drainProxy(t)
	a := open(t, vipA, port)
	update(t, p, twoChains(port, time.Hour))
	if m := p.stats.value(statListenerModified); m != 0 {
		t.Fatalf("listener_modified = %d for an identical update", m)
	}
	if _, ok := closedWithin(a, 2*testDrainTime); ok || !alive(t, a) {
		t.Fatal("an identical update closed a connection")
	}
}

// listenersDump is /config_dump's listeners by name.
func listenersDump(p *Proxy) map[string]*adminv3.ListenersConfigDump_DynamicListener {
	out := map[string]*adminv3.ListenersConfigDump_DynamicListener{}
	for _, a := range p.ConfigDump(false).GetConfigs() {
		var d adminv3.ListenersConfigDump
		if a.UnmarshalTo(&d) != nil {
			continue
		}
		for _, dl := range d.GetDynamicListeners() {
			out[dl.GetName()] = dl
		}
	}
	return out
}
