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
	// readers (the get commands, the kubelet's probes) send well under 1 KiB.
	HTTPMaxHeaderBytes = 16 << 10
	// HTTPMaxConns is how many connections one listener serves at once; more wait in the
	// kernel's accept queue until one ends (every one ends within the timeouts above). The
	// readers are the kubelet's probe and the suite's get commands, a few at a time.
	HTTPMaxConns = 64
)

// Bounds of on-demand CDS against a scan of the Service range (docs/architecture.md,
// "On-demand CDS mode"; docs/security.md row 4), and of the logs a pod can drive.
const (
	// OnDemandPendingMax caps the refused on-demand names an agent remembers (pending: each
	// is admitted as soon as its Service port appears). A name refused while the set is full
	// is not remembered: the agent answers the proxy that it does not exist (delta xDS
	// removed_resources), so the proxy ends its wait at once, and remembers only its address
	// (a bit per address of the Service range), so a Service created there later is still
	// published on that stream.
	OnDemandPendingMax = 4096
	// ProxyOnDemandAbsentMax caps the on-demand names the built-in proxy keeps subscribed after
	// the agent answered them as not existing (internal/adsclient onDemand; Envoy has no such
	// bound and keeps every name). Past it the one dialled least recently is unsubscribed; a
	// name with a cluster, or not answered yet, never is. Keeping an absent name only spares
	// its next dial a discovery when its Service appears later, which a node's pods need for
	// a few misconfigured or not-yet-created Services, not thousands. With the agent's pending
	// bound (the names it leaves unanswered), a proxy keeps at most 2 × 4096 names without a
	// cluster: about 200 KiB of a reconnect's subscription (25-byte names) and about 1 MiB of
	// the proxy's heap, whatever a scan dials.
	ProxyOnDemandAbsentMax = 4096

	// RefusalLogBurst and RefusalLogPerSecond bound the refusal lines (LogRefusal) per reason
	// and source pod: a burst, then a steady rate; what is over is counted in
	// MetricLogSuppressed and reported in a summary line (LogSuppressed) every
	// LogSummaryInterval. The rate is above a client's steady dial rate (the soak's is 5/s), so
	// ordinary refusals are each logged; a scan is not.
	RefusalLogBurst     = 50
	RefusalLogPerSecond = 10
	// RefusalLogTotalPerSecond bounds the refusal lines of all pods together (burst 4×).
	RefusalLogTotalPerSecond = 50
	// OnDemandRefusalLogEvery spaces the agent's per-reason summaries of refused on-demand
	// names after the first OnDemandRefusalLogBurst: each line then counts every name since
	// the last one.
	OnDemandRefusalLogBurst = 5
	OnDemandRefusalLogEvery = 10 * time.Second
	// LogSummaryInterval is how often suppressed lines are summarised.
	LogSummaryInterval = 10 * time.Second

	// MetricLogSuppressed is svclb_log_lines_suppressed_total{log}: log lines not written by
	// the rate limits above (LabelLog LogNameRefusal or LogNameOnDemandRefusal).
	MetricLogSuppressed    = "svclb_log_lines_suppressed_total"
	LabelLog               = "log"
	LogNameRefusal         = "connection-refused"
	LogNameOnDemandRefusal = "ondemand-refused"
	// LogSuppressed is the msg of the summary line of suppressed refusal lines; its keys are
	// LogKeyReason, LogKeySource (the pod's address, no port) and LogKeySuppressed.
	LogSuppressed = "refusal lines suppressed"
	// LogKeySuppressed counts the refusals not logged since the last line (this summary, and
	// the node-local refusal line).
	LogKeySuppressed = "suppressed"

	// MetricOnDemandForgotten counts names refused while the pending set was full (or dropped
	// from it): answered as not existing, only their address remembered.
	MetricOnDemandForgotten = "svclb_ondemand_forgotten_total"
	// MetricOnDemandForgottenAddrs is how many Service-range addresses are remembered for
	// forgotten names.
	MetricOnDemandForgottenAddrs = "svclb_ondemand_forgotten_addresses"
)
