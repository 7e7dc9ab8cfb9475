package measure

import (
	"fmt"
	"net/netip"
	"slices"

	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	grpclogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// listenerProblem says how a capture listener the proxy serves differs from
// what the agent's settings (st) make of it ("" when it does not). It reads
// what the settings decide and nothing more, so that the listener may grow
// what they do not touch (docs/architecture.md, "xDS the agent emits"):
//
//   - every prefix of the Service range is matched (filter_chain_matcher,
//     the trie IPMatcher) with action cap_svc when Phase 1 is on and
//     cap_passthrough_svc when it is off, and that chain exists;
//   - with Phase 1 on, cap_svc's tcp_proxy carries the gRPC access log
//     svclb_refusals exactly when Phase 2 is on, and on_demand exactly in
//     on-demand CDS mode;
//   - in every phase, the node-local ranges and each of the node's
//     addresses the agent names go to cap_refused, and that chain exists.
//
// Chains are found by name, never counted: the listener has as many as its
// settings give it (cap_refused always).
func listenerProblem(l *listenerv3.Listener, st *agentstatus.Status) string {
	var ipm matcherv3.IPMatcher
	tc := l.GetFilterChainMatcher().GetMatcherTree().GetCustomMatch().GetTypedConfig()
	if tc == nil || tc.UnmarshalTo(&ipm) != nil {
		return "no IP matcher on the destination"
	}
	if p := refusedProblem(l, &ipm, st); p != "" {
		return p
	}
	if !st.RangeKnown || len(st.Range) == 0 {
		return ""
	}
	want := contract.ChainPassthroughSvc
	if st.Phase1 {
		want = contract.ChainSvc
	}
	for _, r := range st.Range {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return fmt.Sprintf("agent /status range %q: %v", r, err)
		}
		if got := rangeAction(&ipm, p); got != want {
			return fmt.Sprintf("%s goes to %q", p, got)
		}
	}
	i := slices.IndexFunc(l.GetFilterChains(), func(c *listenerv3.FilterChain) bool { return c.GetName() == want })
	if i < 0 {
		return "no filter chain " + want
	}
	if !st.Phase1 {
		return ""
	}
	tp := tcpProxyOf(l.GetFilterChains()[i])
	if tp == nil {
		return want + " has no tcp_proxy"
	}
	// Phase 2: the refusal log and the connection log (the entry written as the upstream
	// connects), each exactly when it is on.
	logs := map[string]bool{}
	for _, al := range tp.GetAccessLog() {
		var g grpclogv3.TcpGrpcAccessLogConfig
		if al.GetTypedConfig().UnmarshalTo(&g) == nil {
			logs[g.GetCommonConfig().GetLogName()] = true
		}
	}
	for _, name := range []string{contract.RefusalLogName, contract.ConnectionLogName} {
		if logs[name] != st.Phase2 {
			return fmt.Sprintf("%s access log %s: %v", want, name, logs[name])
		}
	}
	if flush := tp.GetAccessLogOptions().GetFlushAccessLogOnConnected(); flush != st.Phase2 {
		return fmt.Sprintf("%s access_log_options.flush_access_log_on_connected: %v", want, flush)
	}
	if onDemand := tp.GetOnDemand() != nil; onDemand != (st.CDS == agentstatus.CDSOnDemand) {
		return fmt.Sprintf("%s on_demand: %v", want, onDemand)
	}
	return ""
}

// refusedProblem says how the listener's node-local refusal differs from the agent's: each of
// contract.NodeLocalRanges and a /32 of each of st.NodeAddresses must select cap_refused.
func refusedProblem(l *listenerv3.Listener, ipm *matcherv3.IPMatcher, st *agentstatus.Status) string {
	want := contract.NodeLocalRanges()
	for _, a := range st.NodeAddresses {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Sprintf("agent /status node address %q: %v", a, err)
		}
		want = append(want, netip.PrefixFrom(ip, 32))
	}
	for _, p := range want {
		if got := rangeAction(ipm, p); got != contract.ChainRefused {
			return fmt.Sprintf("node-local %s goes to %q", p, got)
		}
	}
	if !slices.ContainsFunc(l.GetFilterChains(), func(c *listenerv3.FilterChain) bool { return c.GetName() == contract.ChainRefused }) {
		return "no filter chain " + contract.ChainRefused
	}
	return ""
}

// rangeAction is the action the matcher gives exactly prefix p ("" when no
// range matcher lists it).
func rangeAction(m *matcherv3.IPMatcher, p netip.Prefix) string {
	for _, rm := range m.GetRangeMatchers() {
		for _, r := range rm.GetRanges() {
			a, err := netip.ParseAddr(r.GetAddressPrefix())
			if err == nil && int(r.GetPrefixLen().GetValue()) == p.Bits() && a == p.Addr() {
				return rm.GetOnMatch().GetAction().GetName()
			}
		}
	}
	return ""
}

// tcpProxyOf is the tcp_proxy of a filter chain (nil when it has none).
func tcpProxyOf(c *listenerv3.FilterChain) *tcpproxyv3.TcpProxy {
	for _, f := range c.GetFilters() {
		var tp tcpproxyv3.TcpProxy
		if f.GetTypedConfig().UnmarshalTo(&tp) == nil {
			return &tp
		}
	}
	return nil
}
