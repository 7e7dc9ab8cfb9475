package translate

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aether-mesh/svclb/pkg/contract"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	grpclogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	sfscommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	originaldstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	setfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	netinputsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// IdleTimeout closes an idle captured connection, like tcp_proxy's default (1 h).
const IdleTimeout = time.Hour

// OnDemandTimeout bounds how long cap_svc holds a connection while the proxy asks for its
// cluster (on-demand CDS mode). Envoy's default is 60 s; a name the agent never admits should
// fail fast with NC so Phase 2 counts the refusal.
const OnDemandTimeout = 5 * time.Second

// CapturedPod is a meshed pod on this node whose network namespace was found.
type CapturedPod struct {
	Namespace, Name string
	NetnsPath       string // e.g. /var/run/netns/cni-…
}

// ListenerOptions is the node-wide state every capture listener shares.
type ListenerOptions struct {
	Range      []netip.Prefix // the Service range; ignored unless RangeKnown
	RangeKnown bool
	Phase1     bool // Service range → cap_svc (else cap_passthrough_svc, "today's build")
	Phase2     bool // cap_svc reports UH/NC over gRPC ALS
	OnDemand   bool // cap_svc asks for an unknown svc: cluster over ADS (on-demand CDS mode)
	// KubeProxyVIPs stay kube-proxy's in every phase (KubeProxyVIPs of
	// contract.APIServerService): with Phase 1 on, each one in the range gets a /32 that
	// selects cap_passthrough_svc, on every port, instead of cap_svc, which would find no
	// svc: cluster for it and refuse the connection.
	KubeProxyVIPs []netip.Addr
	// NodeAddrs are the node's own IPv4 addresses (its Node's status.addresses): each gets a /32
	// that selects cap_refused, with contract.NodeLocalRanges, in every phase.
	NodeAddrs []netip.Addr
}

// CaptureListener is the listener bound into one captured pod's network namespace.
func CaptureListener(pod CapturedPod, o ListenerOptions) *listenerv3.Listener {
	l := &listenerv3.Listener{
		Name: contract.ListenerName(pod.Namespace, pod.Name),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			// Loopback only (contract.CaptureAddr): TPROXY delivers the diverted connections
			// there, and a dial of <podIP>:18001 from outside finds no socket, so it can never
			// be passed through back into this listener.
			Address:                  contract.CaptureAddr,
			PortSpecifier:            &corev3.SocketAddress_PortValue{PortValue: contract.CapturePort},
			NetworkNamespaceFilepath: pod.NetnsPath,
		}}},
		Transparent: wrapperspb.Bool(true),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       originalDstFilter,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&originaldstv3.OriginalDst{})},
		}},
		DefaultFilterChain: passthroughChain(contract.ChainPassthrough),
	}
	var matchers []*matcherv3.IPMatcher_IPRangeMatcher
	switch {
	case !o.RangeKnown || len(o.Range) == 0:
		// No range: every destination but the node-local ones passes through unchanged.
	case o.Phase1:
		matchers = []*matcherv3.IPMatcher_IPRangeMatcher{rangeMatcher(o.Range, contract.ChainSvc)}
		l.FilterChains = []*listenerv3.FilterChain{svcFilterChain(pod, o.Phase2, o.OnDemand)}
		// The trie matcher tries the longest matching prefix first and takes its action
		// (source/extensions/common/matcher/trie_matcher.h TrieMatcher::match), so a /32
		// wins over the Service range it lies in.
		if vips := kubeProxyHosts(o.Range, o.KubeProxyVIPs); len(vips) > 0 {
			matchers = append(matchers, rangeMatcher(vips, contract.ChainPassthroughSvc))
			l.FilterChains = append(l.FilterChains, passthroughChain(contract.ChainPassthroughSvc))
		}
	default:
		matchers = []*matcherv3.IPMatcher_IPRangeMatcher{rangeMatcher(o.Range, contract.ChainPassthroughSvc)}
		l.FilterChains = []*listenerv3.FilterChain{passthroughChain(contract.ChainPassthroughSvc)}
	}
	// Node-local destinations are refused in every phase, before anything passes through. The
	// most specific prefix wins, as it does for filter_chain_match's destination_prefix_ranges
	// (source/common/listener_manager/filter_chain_manager_impl.cc, the destination IP trie of
	// FilterChainManagerImpl::findFilterChainForDestinationIP): a node address inside the
	// Service range would still be refused, and nothing here is shorter than a range it lies in.
	matchers = append(matchers, rangeMatcher(NodeLocalPrefixes(o.NodeAddrs), contract.ChainRefused))
	l.FilterChains = append(l.FilterChains, refusedChain(pod))
	l.FilterChainMatcher = &matcherv3.Matcher{MatcherType: &matcherv3.Matcher_MatcherTree_{MatcherTree: &matcherv3.Matcher_MatcherTree{
		Input: &xdscorev3.TypedExtensionConfig{Name: destinationIPInput, TypedConfig: mustAny(&netinputsv3.DestinationIPInput{})},
		TreeType: &matcherv3.Matcher_MatcherTree_CustomMatch{CustomMatch: &xdscorev3.TypedExtensionConfig{
			Name:        trieMatcher,
			TypedConfig: mustAny(&matcherv3.IPMatcher{RangeMatchers: matchers}),
		}},
	}}}
	return l
}

// rangeMatcher sends the destinations in prefixes to chain.
func rangeMatcher(prefixes []netip.Prefix, chain string) *matcherv3.IPMatcher_IPRangeMatcher {
	ranges := make([]*xdscorev3.CidrRange, 0, len(prefixes))
	for _, p := range prefixes {
		ranges = append(ranges, &xdscorev3.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))})
	}
	return &matcherv3.IPMatcher_IPRangeMatcher{
		Ranges: ranges,
		OnMatch: &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{Action: &xdscorev3.TypedExtensionConfig{
			Name: chain, TypedConfig: mustAny(wrapperspb.String(chain)),
		}}},
	}
}

// kubeProxyHosts are the /32s of the vips inside the Service range, sorted and without
// duplicates; one outside it passes through by the default chain already.
func kubeProxyHosts(serviceRange []netip.Prefix, vips []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range vips {
		if !v.Is4() || !slices.ContainsFunc(serviceRange, func(p netip.Prefix) bool { return p.Contains(v) }) {
			continue
		}
		out = append(out, netip.PrefixFrom(v, 32))
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return slices.Compact(out)
}

// NodeLocalPrefixes are what cap_refused takes: contract.NodeLocalRanges and a /32 of each of
// the node's IPv4 addresses, sorted and without duplicates.
func NodeLocalPrefixes(nodeAddrs []netip.Addr) []netip.Prefix {
	out := contract.NodeLocalRanges()
	var hosts []netip.Prefix
	for _, a := range nodeAddrs {
		if a = a.Unmap(); a.Is4() {
			hosts = append(hosts, netip.PrefixFrom(a, 32))
		}
	}
	slices.SortFunc(hosts, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return append(out, slices.Compact(hosts)...)
}

// refusedChain closes every connection it takes: its cluster has no endpoint, so tcp_proxy
// finds no host and closes with UH (source/common/tcp_proxy/tcp_proxy.cc
// Filter::establishUpstreamConnection), counted in tcp.cap_refused.downstream_cx_total only
// (Envoy 1.39 counts no upstream_cx_none_healthy there, docs/envoy-fidelity.md). Its access log
// reports each one to the agent, with the pod the listener belongs to: the source address of
// a pod dialling its own loopback is 127.0.0.1.
func refusedChain(pod CapturedPod) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{Name: contract.ChainRefused, Filters: []*listenerv3.Filter{tcpProxy(&tcpproxyv3.TcpProxy{
		StatPrefix:       contract.ChainRefused,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: contract.BlackholeCluster},
		AccessLog: []*accesslogv3.AccessLog{grpcAccessLog(contract.NodeLocalLogName, nil, &tracingv3.CustomTag{
			Tag:  contract.TagPod,
			Type: &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: pod.Namespace + "/" + pod.Name}},
		})},
	})}}
}

// Blackhole is cap_refused's cluster: STATIC, with no endpoint.
func Blackhole() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 contract.BlackholeCluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(ConnectTimeout),
		LoadAssignment:       &endpointv3.ClusterLoadAssignment{ClusterName: contract.BlackholeCluster},
	}
}

func passthroughChain(name string) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{Name: name, Filters: []*listenerv3.Filter{tcpProxy(&tcpproxyv3.TcpProxy{
		StatPrefix:       name,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: contract.PassthroughCluster},
		IdleTimeout:      durationpb.New(IdleTimeout),
	})}}
}

// svcFilterChain is cap_svc of pod's listener. Its set_filter_state names the svc: cluster
// and, when pod's netns is known, the upstream's network namespace: the pod's own, shared with
// the upstream connection, which the svc: cluster's local address selector binds the upstream
// socket in (SvcUpstreamBindConfig). The upstream then leaves from the pod's address through
// the pod's own routes and egress path, as kube-proxy's DNAT of the pod's own connection does.
func svcFilterChain(pod CapturedPod, phase2, onDemand bool) *listenerv3.FilterChain {
	sfs := &setfilterstatev3.Config{OnNewConnection: []*sfscommonv3.FilterStateValue{{
		Key:   &sfscommonv3.FilterStateValue_ObjectKey{ObjectKey: filterStateKey},
		Value: inlineFormat(filterStateFormat),
	}}}
	if pod.NetnsPath != "" {
		sfs.OnNewConnection = append(sfs.OnNewConnection, &sfscommonv3.FilterStateValue{
			Key: &sfscommonv3.FilterStateValue_ObjectKey{ObjectKey: netnsFilterStateKey},
			// No factory is registered under the object's own key: the generic string one
			// builds it (docs/root/configuration/advanced/well_known_filter_state.rst).
			FactoryKey: stringObjectFactory,
			// A netns path holds no '%', so the format is the literal path.
			Value: inlineFormat(pod.NetnsPath),
			// The selector reads only the downstream's objects shared with the upstream
			// (TransportSocketOptions::downstreamSharedFilterStateObjects).
			SharedWithUpstream: sfscommonv3.FilterStateValue_ONCE,
		})
	}
	tp := &tcpproxyv3.TcpProxy{
		StatPrefix: contract.ChainSvc,
		// Never published: the filter state set above always names the svc: cluster.
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: contract.PlaceholderCluster},
		IdleTimeout:      durationpb.New(IdleTimeout),
		// Only RING_HASH clusters (ClientIP affinity) consult it; it is inert elsewhere.
		HashPolicy: []*typev3.HashPolicy{{PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}}}},
		// A failed connect is retried on the host the load balancer picks next, so one dead
		// endpoint does not fail the caller (why 3: pkg/contract SvcMaxConnectAttempts).
		MaxConnectAttempts: wrapperspb.UInt32(contract.SvcMaxConnectAttempts),
	}
	if onDemand {
		// The ADS config source: Envoy keeps a per-name subscription on the ADS stream for it
		// (source/common/tcp_proxy/tcp_proxy.cc OnDemandConfig::OnDemandConfig, envoy#43529),
		// and the agent serves nothing but ADS.
		tp.OnDemand = &tcpproxyv3.TcpProxy_OnDemand{
			OdcdsConfig: &corev3.ConfigSource{
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
				ResourceApiVersion:    corev3.ApiVersion_V3,
			},
			Timeout: durationpb.New(OnDemandTimeout),
		}
	}
	if phase2 {
		// Refusals: the entry Envoy writes as the connection ends, when the proxy closed it
		// with UH or NC.
		refusals := grpcAccessLog(contract.RefusalLogName, &accesslogv3.AccessLogFilter{
			FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
				ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: []string{"UH", "NC"}},
			}})
		// Connections: the one entry tcp_proxy writes when the upstream connects
		// (source/common/tcp_proxy/tcp_proxy.cc Filter::onUpstreamConnection, with
		// flush_access_log_on_connected), and only it: the entry at the end of the same
		// connection has access_log_type TcpConnectionEnd. Its own logger, so the refusal
		// log's config and stream stay what they were.
		connections := grpcAccessLog(contract.ConnectionLogName, &accesslogv3.AccessLogFilter{
			FilterSpecifier: &accesslogv3.AccessLogFilter_LogTypeFilter{
				LogTypeFilter: &accesslogv3.LogTypeFilter{Types: []accesslogdatav3.AccessLogType{accesslogdatav3.AccessLogType_TcpUpstreamConnected}},
			}})
		tp.AccessLog = []*accesslogv3.AccessLog{refusals, connections}
		tp.AccessLogOptions = &tcpproxyv3.TcpProxy_TcpAccessLogOptions{FlushAccessLogOnConnected: true}
	}
	return &listenerv3.FilterChain{Name: contract.ChainSvc, Filters: []*listenerv3.Filter{
		{Name: setFilterStateFilter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(sfs)}},
		tcpProxy(tp),
	}}
}

// grpcAccessLog is a tcp_grpc access log to the agent (contract.XDSCluster) named logName.
func grpcAccessLog(logName string, filter *accesslogv3.AccessLogFilter, tags ...*tracingv3.CustomTag) *accesslogv3.AccessLog {
	return &accesslogv3.AccessLog{
		Name:   tcpGRPCAccessLog,
		Filter: filter,
		ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(&grpclogv3.TcpGrpcAccessLogConfig{
			CommonConfig: &grpclogv3.CommonGrpcAccessLogConfig{
				LogName: logName,
				GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
					EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: contract.XDSCluster},
				}},
				TransportApiVersion: corev3.ApiVersion_V3,
				CustomTags:          tags,
			},
		})},
	}
}

func inlineFormat(text string) *sfscommonv3.FilterStateValue_FormatString {
	return &sfscommonv3.FilterStateValue_FormatString{FormatString: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
			Specifier: &corev3.DataSource_InlineString{InlineString: text},
		}},
	}}
}

func tcpProxy(tp *tcpproxyv3.TcpProxy) *listenerv3.Filter {
	return &listenerv3.Filter{Name: tcpProxyFilter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(tp)}}
}

// PassthroughOriginalDst is the cluster every passed-through destination leaves through.
//
// It dials from the proxy's own netns, the node's: it has no local address selector, so the
// upstream namespace cap_svc names for the svc: clusters (SvcUpstreamBindConfig) never applies
// here, and kube-proxy's DNAT and the guard's `--cut=proxy` rule, both in the host netns, see
// its connections to ClusterIPs. Its SO_MARK (contract.ProxyUpstreamMark) is what that guard
// rule matches; in the host netns nothing else svclb installs matches it (it lacks
// kube-proxy's masquerade bit 0x4000). The svc: clusters carry the same mark, where it matters
// in the pod's netns: the capture's output chain exempts it (internal/capture outputRules).
func PassthroughOriginalDst() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 contract.PassthroughCluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		ConnectTimeout:       durationpb.New(ConnectTimeout),
		UpstreamBindConfig:   &corev3.BindConfig{SocketOptions: []*corev3.SocketOption{proxyMarkOption()}},
	}
}

// proxyMarkOption is SO_MARK contract.ProxyUpstreamMark on an upstream socket, set before bind.
func proxyMarkOption() *corev3.SocketOption {
	return &corev3.SocketOption{
		Description: fmt.Sprintf("SO_MARK %#x: the proxy's own upstream", contract.ProxyUpstreamMark),
		Level:       soMarkLevel,
		Name:        soMark,
		Value:       &corev3.SocketOption_IntValue{IntValue: contract.ProxyUpstreamMark},
		State:       corev3.SocketOption_STATE_PREBIND,
	}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", m, err)) // only fails for a broken proto registry
	}
	return a
}
