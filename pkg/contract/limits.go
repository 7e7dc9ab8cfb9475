package contract

import "time"

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

// Bounds every HTTP server of svclb serves with (internal/httpserve): the agent's
// (AgentPort), the guard's (GuardPort) and the built-in proxy's admin (ProxyAdminPort). The
// agent and the guard listen on the pod IP, which on hostNetwork is the node's and which every
// pod can reach: without them a client that connects and sends nothing, or keeps a keep-alive
// connection idle, holds its socket for ever, and enough of them exhaust the process.
const (
	// HTTPReadHeaderTimeout bounds the wait for a request's headers, from the connection's
	// first byte (or the end of the previous request).
	HTTPReadHeaderTimeout = 5 * time.Second
	// HTTPReadTimeout bounds reading a whole request, body included (the endpoints take none
	// but the admin's few POSTs).
	HTTPReadTimeout = 10 * time.Second
	// HTTPWriteTimeout bounds a request from its headers' end to the answer's last byte, so a
	// client that stops reading is cut; it leaves time for the largest answer, the built-in
	// proxy's /config_dump?include_eds at 10k Services.
	HTTPWriteTimeout = 30 * time.Second
	// HTTPIdleTimeout is how long a keep-alive connection waits for its next request.
	HTTPIdleTimeout = 60 * time.Second
	// HTTPMaxHeaderBytes caps a request's headers (net/http's default is 1 MiB); the
	// apiserver's pod proxy and the kubelet's probes send well under 1 KiB.
	HTTPMaxHeaderBytes = 16 << 10
	// HTTPMaxConns is how many connections one listener serves at once; more wait in the
	// kernel's accept queue until one ends (every one ends within the timeouts above). The
	// readers are the kubelet's probe, the apiserver's pod proxy and the suite, a few at a time.
	HTTPMaxConns = 64
)
