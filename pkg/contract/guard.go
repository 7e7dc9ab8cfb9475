package contract

// The guard's cut modes (svclb-guard run --cut): how a chosen Service's ports the meshed path
// takes over (MeshServes) are taken off kube-proxy's path.
const (
	// GuardCutAll overwrites kube-proxy's ClusterIP entries of those ports (verdict continue):
	// every client that is not meshed meets kube-proxy's REJECT, host processes included. The
	// default, and the acceptance legs' cut.
	GuardCutAll = "all"
	// GuardCutProxy refuses (TCP reset) only what the node proxy would hand to kube-proxy: its
	// new connections to those ports' ClusterIPs, which carry SO_MARK ProxyUpstreamMark (the
	// passthrough cluster's). Host processes and pods that are not meshed keep kube-proxy for
	// the same Services: a run judges the meshed path alone (the upstream conformance run).
	GuardCutProxy = "proxy"
)

// The guard's own nftables objects (GuardCutProxy): table GuardTable (family ip) holds set
// GuardProxyCutSet of the cut ClusterIP . port pairs and the one rule that resets the node
// proxy's marked connections to them, hooked before kube-proxy's DNAT.
const (
	GuardTable       = "svclb-guard"
	GuardProxyCutSet = "proxy-cut-vips"
)
