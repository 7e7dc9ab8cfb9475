package translate

import "github.com/aether-mesh/svclb/pkg/contract"

// The values of the xDS the agent emits that nothing else reads; the shared
// names are in pkg/contract.
const (
	maxEjectionPercent  = 99    // see outlierDetection
	soMarkLevel, soMark = 1, 36 // SOL_SOCKET, SO_MARK
	// IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT (Linux >= 4.2): see SvcUpstreamBindConfig.
	bindNoPortLevel, bindNoPort = 0, 24
	filterStateKey              = "envoy.tcp_proxy.cluster"
	filterStateFormat           = contract.ClusterPrefix + "%DOWNSTREAM_LOCAL_ADDRESS%"
	// The upstream's network namespace (SvcUpstreamBindConfig): the filter state object the
	// filter_state_override local address selector reads, the generic string factory that
	// builds it, and the selector's extension name.
	netnsFilterStateKey  = "envoy.network.upstream_bind_override.network_namespace"
	stringObjectFactory  = "envoy.string"
	netnsAddressSelector = "envoy.upstream.local_address_selector.filter_state_override"
	destinationIPInput   = "envoy.matching.inputs.destination_ip"
	trieMatcher          = "envoy.matching.custom_matchers.trie_matcher"
	originalDstFilter    = "envoy.filters.listener.original_dst"
	setFilterStateFilter = "envoy.filters.network.set_filter_state"
	tcpProxyFilter       = "envoy.filters.network.tcp_proxy"
	tcpGRPCAccessLog     = "envoy.access_loggers.tcp_grpc"
)

// Overprovisioning is every load assignment's overprovisioning_factor: large enough that a
// priority band keeps all the load while it has one usable (healthy, not ejected) host, so
// the next band (other zones, then terminating endpoints) takes traffic only when a band has
// none, as kube-proxy and KEP-1669 do. Envoy's default 140 would instead spill
// 100 − min(100, 140 × healthy/total) percent: ejecting 1 of 2 ready hosts would send 30 %
// to terminating endpoints.
//
// Envoy computes a band's availability as min(100, factor × healthy / total) with the
// product in 64 bits (factor uint32, healthy and total uint64 host counts; weights when
// weighted_priority_health is set, which the agent never sets) and then converts to
// uint32 (source/extensions/load_balancing_policies/common/load_balancer_impl.cc
// LoadBalancerBase::recalculatePerPriorityState). With factor 10^7 one healthy host makes a
// band 100 % available for up to 10^5 hosts per band (10^7 × 1 / 10^5 = 100); the product
// stays far below 2^64, and the quotient, at most the factor, below 2^32. The proto only
// requires > 0. The factor also scales locality weights, but only under
// locality_weighted_lb_config, which the agent does not set.
const Overprovisioning = 10_000_000
