package translate

import "github.com/aether-mesh/svclb/pkg/contract"

// The values of the xDS the agent emits that nothing else reads; the shared
// names are in pkg/contract.
const (
	overprovisioning     = 140
	localOriginFailures  = 5
	soMarkLevel, soMark  = 1, 36 // SOL_SOCKET, SO_MARK
	filterStateKey       = "envoy.tcp_proxy.cluster"
	filterStateFormat    = contract.ClusterPrefix + "%DOWNSTREAM_LOCAL_ADDRESS%"
	destinationIPInput   = "envoy.matching.inputs.destination_ip"
	trieMatcher          = "envoy.matching.custom_matchers.trie_matcher"
	originalDstFilter    = "envoy.filters.listener.original_dst"
	setFilterStateFilter = "envoy.filters.network.set_filter_state"
	tcpProxyFilter       = "envoy.filters.network.tcp_proxy"
	tcpGRPCAccessLog     = "envoy.access_loggers.tcp_grpc"
)
