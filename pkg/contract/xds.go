package contract

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The node proxy's xDS identity and the names in the config the agent emits.
const (
	// NodeIDPrefix + node name is the proxy's xDS node id.
	NodeIDPrefix = "svclb-node~"
	// NodeCluster is the proxy's xDS node cluster.
	NodeCluster = "svclb"
	// XDSCluster is the bootstrap cluster pointing at XDSSocket.
	XDSCluster = "xds_cluster"

	// ChainSvc takes Service-range traffic into a svc: cluster (Phase 1).
	ChainSvc = "cap_svc"
	// ChainPassthrough takes everything outside the Service range.
	ChainPassthrough = "cap_passthrough"
	// ChainPassthroughSvc takes Service-range traffic to its original
	// destination (Phase 1 off: kube-proxy's path, counted for Phase 0).
	ChainPassthroughSvc = "cap_passthrough_svc"
	// PassthroughCluster is the ORIGINAL_DST cluster of both passthrough chains.
	PassthroughCluster = "passthrough_original_dst"
	// PlaceholderCluster is cap_svc's static cluster, overridden per
	// connection by the filter state.
	PlaceholderCluster = "svc_placeholder"
	// RefusalLogName is the gRPC access log that reports refusals (Phase 2).
	RefusalLogName = "svclb_refusals"
	// ConnectionLogName is the gRPC access log that reports each connection cap_svc connected
	// to its upstream (Phase 2): one entry of access_log_type TcpUpstreamConnected per
	// connection (tcp_proxy access_log_options.flush_access_log_on_connected), which the agent
	// counts in MetricSvcConnections.
	ConnectionLogName = "svclb_connections"
	// ListenerPrefix starts every capture listener's name.
	ListenerPrefix = "capture~"
	// ClusterPrefix starts every Service port's cluster name.
	ClusterPrefix = "svc:"
)

// NodeID is the xDS node id of the proxy on node.
func NodeID(node string) string { return NodeIDPrefix + node }

// ClusterName is the svc: cluster name of a Service port, the same string the
// proxy builds from %DOWNSTREAM_LOCAL_ADDRESS% of a captured connection.
func ClusterName(vip netip.Addr, port uint16) string {
	return ClusterPrefix + netip.AddrPortFrom(vip, port).String()
}

// StatName is the alt_stat_name of a Service port's cluster, so its stats
// read cluster.svc.<ns>.<name>.<port>.*.
func StatName(namespace, name string, port uint16) string {
	return "svc." + namespace + "." + name + "." + strconv.Itoa(int(port))
}

// ListenerName names the capture listener of a pod.
func ListenerName(namespace, pod string) string {
	return ListenerPrefix + namespace + "~" + pod
}

// ParseClusterName is the inverse of ClusterName. Only the canonical spelling
// ClusterName produces is accepted (IPv4, no leading zeros), since any other
// string can never name a published cluster.
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
