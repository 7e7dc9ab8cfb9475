package contract

import (
	"net/netip"
	"time"
)

// Node-local destinations: what a capture listener refuses instead of passing through. The
// passthrough dials from the node's netns, so without this a meshed pod that changes its own
// capture (NET_ADMIN in its netns) reaches, as the node, the node's loopback (the proxy's admin,
// the kubelet's and kube-proxy's local ports), link-local addresses (cloud metadata) and the
// node's own addresses (docs/security.md, item 2).
const (
	// ChainRefused is the capture listener's chain of node-local destinations: its tcp_proxy
	// goes to BlackholeCluster, which has no endpoint, so the proxy closes the connection at
	// once (UH) and counts it (tcp.cap_refused.downstream_cx_total; the agent, from the access
	// log, MetricNodeLocalRefused).
	ChainRefused = "cap_refused"
	// BlackholeCluster is ChainRefused's STATIC cluster without endpoints.
	BlackholeCluster = "blackhole"
	// NodeLocalLogName is ChainRefused's gRPC access log: every connection it takes is
	// reported to the agent, which counts (MetricNodeLocalRefused) and logs it
	// (LogRefusal, reason ReasonNodeLocal).
	NodeLocalLogName = "svclb_node_local"
	// TagPod is the access log's custom tag naming the listener's pod (namespace/name): a pod
	// that dials its own loopback is seen from 127.0.0.1, which names no pod.
	TagPod = "pod"
	// ReasonNodeLocal is the LogKeyReason of a node-local refusal.
	ReasonNodeLocal = "node-local"
	// LogKeyPod is the refusal log line's pod (namespace/name) for ReasonNodeLocal.
	LogKeyPod = "pod"
	// MetricNodeLocalRefused is svclb_node_local_refused_total: connections to node-local
	// destinations the node proxy refused.
	MetricNodeLocalRefused = "svclb_node_local_refused_total"
	// NodeLocalLogBurst and NodeLocalLogEvery bound the agent's node-local refusal lines, which
	// a pod can drive: a burst of NodeLocalLogBurst lines, then one per NodeLocalLogEvery; the
	// refusals in between are counted (LogKeySuppressed), not logged.
	NodeLocalLogBurst = 20
	NodeLocalLogEvery = time.Second
)

// NodeLocalRanges are the fixed node-local ranges ChainRefused takes, besides the node's own
// addresses: "this network" (0.0.0.0/8, which Linux delivers locally), loopback, link-local,
// multicast and the reserved 240.0.0.0/4 (broadcast included).
func NodeLocalRanges() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("224.0.0.0/4"),
		netip.MustParsePrefix("240.0.0.0/4"),
	}
}
