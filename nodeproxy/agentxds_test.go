package nodeproxy

// The tests feed the proxy the agent's own xDS (internal/translate), changed
// only by the named mutations below where a test needs what the agent does
// not emit: a loopback listener, another on-demand timeout, a priority
// layout, or, in the NACK tests, one deliberately broken field.

import (
	"net/netip"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/internal/translate/translatetest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// loopbackRange is the Service range of the tests without TPROXY: every
// 127.0.0.0/8 destination counts as a VIP, so a connection to a listener on
// 127.0.0.1:<port> goes to the cluster svc:127.0.0.1:<port>.
var loopbackRange = netip.MustParsePrefix("127.0.0.0/8")

// loopbackOptions is the agent's node-wide listener state with Phase 1 on and
// loopbackRange as the Service range.
func loopbackOptions(phase2 bool) translate.ListenerOptions {
	o := translatetest.Options(true, phase2)
	o.Range = []netip.Prefix{loopbackRange}
	return o
}

// listenerMut changes one thing of the agent's listener for a test.
type listenerMut func(*listenerv3.Listener)

// captureListener is the agent's capture listener for pod with o, then muts
// (nil ones skipped).
func captureListener(pod translate.CapturedPod, o translate.ListenerOptions, muts ...listenerMut) *listenerv3.Listener {
	l := translate.CaptureListener(pod, o)
	for _, m := range muts {
		if m != nil {
			m(l)
		}
	}
	return l
}

// onLoopback listens on addr in the proxy's own network namespace instead of
// 0.0.0.0:CapturePort in the pod's, without IP_TRANSPARENT: with no TPROXY
// the client dials the listener itself, whose address is then the "VIP".
func onLoopback(addr netip.AddrPort) listenerMut {
	return func(l *listenerv3.Listener) {
		sa := l.GetAddress().GetSocketAddress()
		sa.Address = addr.Addr().String()
		sa.PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: uint32(addr.Port())}
		l.Transparent = wrapperspb.Bool(false)
	}
}

// chain is the listener's filter chain called name (the default one too).
func chain(l *listenerv3.Listener, name string) *listenerv3.FilterChain {
	for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
		if fc.GetName() == name {
			return fc
		}
	}
	panic("listener " + l.GetName() + " has no filter chain " + name)
}

// svcTCPProxy is the tcp_proxy of cap_svc, its last (terminal) filter.
func svcTCPProxy(l *listenerv3.Listener) *tcpproxyv3.TcpProxy {
	fs := chain(l, contract.ChainSvc).Filters
	var tp tcpproxyv3.TcpProxy
	if err := fs[len(fs)-1].GetTypedConfig().UnmarshalTo(&tp); err != nil {
		panic(err)
	}
	return &tp
}

// withSvcTCPProxy applies mut to cap_svc's tcp_proxy.
func withSvcTCPProxy(mut func(*tcpproxyv3.TcpProxy)) listenerMut {
	return func(l *listenerv3.Listener) {
		tp := svcTCPProxy(l)
		mut(tp)
		fs := chain(l, contract.ChainSvc).Filters
		fs[len(fs)-1].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(tp)}
	}
}

// onDemand gives cap_svc the on_demand of the agent's on-demand mode
// (ListenerOptions.OnDemand) with timeout d instead of
// translate.OnDemandTimeout; 0 leaves it unset (Envoy's 60 s). The tests hold
// connections for shorter or longer than the agent does.
func onDemand(d time.Duration) listenerMut {
	o := translatetest.Options(true, false)
	o.OnDemand = true
	od := svcTCPProxy(translate.CaptureListener(translate.CapturedPod{}, o)).OnDemand
	od.Timeout = nil
	if d > 0 {
		od.Timeout = durationpb.New(d)
	}
	return withSvcTCPProxy(func(tp *tcpproxyv3.TcpProxy) { tp.OnDemand = proto.Clone(od).(*tcpproxyv3.TcpProxy_OnDemand) })
}

// clusterOf is the svc: cluster name of the Service port at ap.
func clusterOf(ap netip.AddrPort) string { return contract.ClusterName(ap.Addr(), ap.Port()) }

// loadAssignment is the agent's assignment of cluster name with the
// endpoints of prios[p] in priority p (an empty priority is left out).
func loadAssignment(name string, prios ...[]netip.AddrPort) *endpointv3.ClusterLoadAssignment {
	var eps []translate.Endpoint
	for p, addrs := range prios {
		for _, a := range addrs {
			eps = append(eps, translate.Endpoint{Addr: a, Priority: uint32(p)})
		}
	}
	return translate.LoadAssignment(name, eps)
}
