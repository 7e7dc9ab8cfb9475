package contract

// The node proxy's global downstream connection limit: Envoy's bootstrap
// resource monitor envoy.resource_monitors.global_downstream_max_connections
// (fixtures/envoy) and svclb-nodeproxy's --max-downstream-connections default.
// It keeps the proxy below its file-descriptor limit: at the limit it closes new
// connections at accept and serves the ones it holds, its xDS and its admin;
// at the fd limit every accept and every dial fails with EMFILE instead.
const (
	// ProxyFDLimit is the RLIMIT_NOFILE the proxy container runs with on a kind
	// node. Nothing sets one for the container: the node image's CRI base spec
	// has no process.rlimits (kind's images/base/Dockerfile, and
	// kindconfig/nodeimage/build.sh, delete them), so the proxy inherits
	// containerd's; kind's containerd.service asks for LimitNOFILE=infinity,
	// which systemd lowers to the most it may set, the node container's hard
	// limit. Current Docker engines and containerd 2.x give containers
	// systemd's default hard limit, 524288; older ones give more.
	// svclb-nodeproxy warns at start when its own limit is lower than
	// ProxyMaxDownstreamConnections needs.
	ProxyFDLimit = 524288
	// ProxyFDsPerConnection is what one proxied connection holds at most: its
	// downstream and upstream sockets (all that Envoy holds), and in the
	// built-in proxy a splice pipe (two fds) per direction, which io.Copy keeps
	// while that direction is open.
	ProxyFDsPerConnection = 6
	// ProxyFDHeadroom is left for everything else: a listening socket per
	// captured pod (the kubelet's default maxPods is 110; Envoy opens one per
	// worker thread), the xDS and access-log streams, admin connections, logs
	// and the runtime's own.
	ProxyFDHeadroom = 32768
	// ProxyMaxDownstreamConnections is (524288 - 32768) / 6 = 81920 downstream
	// connections, counted across all the proxy's listeners.
	ProxyMaxDownstreamConnections = (ProxyFDLimit - ProxyFDHeadroom) / ProxyFDsPerConnection
)
