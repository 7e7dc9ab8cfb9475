package translate

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Names shared with the node proxy (docs/architecture.md). Keep them in sync with the contract.
const (
	CapturePort          = 18001
	ProxyUpstreamMark    = 0xae7e
	ChainSvc             = "cap_svc"
	ChainPassthrough     = "cap_passthrough"
	ChainPassthroughSvc  = "cap_passthrough_svc"
	PassthroughCluster   = "passthrough_original_dst"
	PlaceholderCluster   = "svc_placeholder"
	XDSCluster           = "xds_cluster"
	RefusalLogName       = "svclb_refusals"
	ListenerPrefix       = "capture~"
	ClusterPrefix        = "svc:"
	overprovisioning     = 140
	localOriginFailures  = 5
	soMarkLevel, soMark  = 1, 36 // SOL_SOCKET, SO_MARK
	filterStateKey       = "envoy.tcp_proxy.cluster"
	filterStateFormat    = "svc:%DOWNSTREAM_LOCAL_ADDRESS%"
	destinationIPInput   = "envoy.matching.inputs.destination_ip"
	trieMatcher          = "envoy.matching.custom_matchers.trie_matcher"
	originalDstFilter    = "envoy.filters.listener.original_dst"
	setFilterStateFilter = "envoy.filters.network.set_filter_state"
	tcpProxyFilter       = "envoy.filters.network.tcp_proxy"
	tcpGRPCAccessLog     = "envoy.access_loggers.tcp_grpc"
)

// ClusterName is the svc: cluster name of a Service port, the same string the proxy builds from
// %DOWNSTREAM_LOCAL_ADDRESS% of a captured connection.
func ClusterName(vip netip.Addr, port uint16) string {
	return ClusterPrefix + netip.AddrPortFrom(vip, port).String()
}

// StatName is the alt_stat_name of a Service port's cluster.
func StatName(namespace, name string, port uint16) string {
	return "svc." + namespace + "." + name + "." + strconv.Itoa(int(port))
}

// ListenerName names the capture listener of a pod.
func ListenerName(namespace, pod string) string {
	return ListenerPrefix + namespace + "~" + pod
}

// ParseClusterName is the inverse of ClusterName. Only the canonical spelling ClusterName
// produces is accepted (IPv4, no leading zeros), since any other string can never name a
// published cluster.
func ParseClusterName(name string) (netip.AddrPort, error) {
	rest, ok := strings.CutPrefix(name, ClusterPrefix)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("cluster name %q: no %q prefix", name, ClusterPrefix)
	}
	ap, err := netip.ParseAddrPort(rest)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("cluster name %q: %w", name, err)
	}
	if !ap.Addr().Is4() {
		return netip.AddrPort{}, fmt.Errorf("cluster name %q: not an IPv4 address", name)
	}
	if ClusterName(ap.Addr(), ap.Port()) != name {
		return netip.AddrPort{}, errors.New("cluster name " + strconv.Quote(name) + ": not in canonical form")
	}
	return ap, nil
}
