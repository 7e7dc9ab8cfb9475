package contract

import "k8s.io/apimachinery/pkg/types"

// Kubernetes objects the suite deploys and the agent and guard read.
const (
	// Namespace holds everything svclb deploys as infrastructure.
	Namespace = "svclb-system"
	// NodeDaemonSet runs the agent and the node proxy on every node.
	NodeDaemonSet = "svclb-node"
	// NodeServiceAccount is the node DaemonSet's identity.
	NodeServiceAccount = "svclb-node"
	// GuardName names the guard's DaemonSet, ServiceAccount and RBAC.
	GuardName = "svclb-guard"
	// RunLease, a coordination.k8s.io Lease in RunLeaseNamespace, is held by the one suite run
	// (legs, soak, perf) that may flip the agent's flags and the guard's cuts on the cluster.
	// It lives in kube-system, as leader-election leases do, so that it exists before
	// Namespace does and outlives an uninstall that deletes Namespace.
	RunLease          = "svclb-e2e-run"
	RunLeaseNamespace = "kube-system"

	// AgentConfigMap carries the agent's live settings (keys below).
	AgentConfigMap = "svclb-agent"
	// KeyPhase1 and KeyPhase2 switch Phase 1 (svc: clusters) and Phase 2
	// (refusals) (exactly "true"/"false"); KeyCDS is the CDS mode ("proactive"
	// or "on-demand"). KeyNamespaceSelector (cni.go) is the fourth key and
	// KeyRefusal the fifth; the agent reports any other (MetricSettingsErrors).
	KeyPhase1 = "phase1"
	KeyPhase2 = "phase2"
	KeyCDS    = "cds"
	// KeyRefusal says how a captured connection to a Service port with no
	// endpoint for the node is refused while Phase 1 and Phase 2 are on:
	// RefusalClose (the default) accepts it and closes it (the caller reads
	// EOF), RefusalReset resets its SYN in the pod's netns (the caller's
	// connect fails with ECONNREFUSED, as through kube-proxy).
	KeyRefusal   = "refusal"
	RefusalClose = "close"
	RefusalReset = "reset"
	// FlagReset is the refusal log line's LogKeyFlag for a connection whose
	// SYN the pod's refuse table reset (no proxy saw it).
	FlagReset = "RST"

	// CapturedLabel marks a pod whose egress is captured ("true").
	CapturedLabel = "svclb.dev/captured"
	// KubeProxyLabel=KubeProxyCut on a Service asks the guard to cut
	// kube-proxy's objects for it, and keep them cut.
	KubeProxyLabel = "svclb.dev/kube-proxy"
	KubeProxyCut   = "deleted"
	// ServiceProxyNameLabel on a Service hands it to another proxy: kube-proxy
	// and the agent leave it alone (k8s.io/kubernetes/pkg/proxy/apis,
	// LabelServiceProxyName; not in k8s.io/api).
	ServiceProxyNameLabel = "service.kubernetes.io/service-proxy-name"
	// ProxyAnnotation on the node pods names the node proxy that runs
	// ("envoy" or "builtin").
	ProxyAnnotation = "svclb.dev/proxy"
)

// Paths on a node.
const (
	// SocketDir is shared by agent and proxy (an emptyDir).
	SocketDir = "/run/svclb"
	// XDSSocket serves delta ADS and gRPC ALS (mode 0600).
	XDSSocket = SocketDir + "/xds.sock"
	// DemandDir (hostPath) keeps the agent's on-demand admissions across restarts.
	DemandDir = "/var/lib/svclb"
	// DemandFile is the agent's persisted on-demand admissions.
	DemandFile = DemandDir + "/demand.json"
	// NetnsDir holds the pods' network namespace files (containerd's CNI
	// setup, as on a kind node); the agent finds a captured pod's netns there.
	NetnsDir = "/var/run/netns"
)

// AgentBinary and GuardBinary are the daemons' paths in their images (kindconfig/images.sh
// puts cmd/<name> at /<name>). Their HTTP listens on the node's loopback only, so a reader
// runs "<binary> get PATH" in the container (internal/loopget).
const (
	AgentBinary = "/svclb-agent"
	GuardBinary = "/svclb-guard"
)

// Ports.
const (
	// AgentPort serves the agent's /metrics, /status and /healthz.
	AgentPort = 9750
	// GuardPort serves the guard's /metrics, /status and /healthz.
	GuardPort = 9751
	// ProxyAdminPort is the node proxy's admin API, on 127.0.0.1 as Envoy's.
	ProxyAdminPort = 9901
	// CapturePort is the transparent listener the capture diverts to, in
	// every captured pod's network namespace.
	CapturePort = 18001
	// CaptureAddr is the address that listener binds and the capture's TPROXY delivers to.
	// Loopback, not 0.0.0.0: a socket bound there is found for packets that arrive on lo (the
	// diverted ones) and for nothing that arrives from another host, so a dial of
	// <podIP>:CapturePort from outside cannot enter the proxy and be passed through back to the
	// same listener (the capture's input chain also resets it).
	CaptureAddr = "127.0.0.1"
)

// What the meshed path takes over from kube-proxy: a meshed pod's TCP to a Service port other
// than DNSPort. The capture marks outbound TCP only and returns DNS over TCP unmarked, so it
// reaches the resolver through kube-proxy as DNS over UDP does, and the agent serves TCP only.
// Every other port, of meshed pods and of everyone else, stays on kube-proxy's path: the guard
// cuts kube-proxy's ClusterIP entry of a Service port only where MeshServes holds.
const (
	// MeshProtocol is the IP protocol the capture diverts (IANA number: IPPROTO_TCP).
	MeshProtocol = 6
	// DNSPort is the TCP port the capture leaves to kube-proxy.
	DNSPort = 53
)

// MeshServes reports whether a meshed pod's connections to a Service port of IP protocol proto
// (IANA number) and port port go through the meshed path rather than kube-proxy's.
func MeshServes(proto uint8, port uint16) bool { return proto == MeshProtocol && port != DNSPort }

// Packet marks.
const (
	// CaptureMark marks a captured pod's outbound TCP for the divert route.
	CaptureMark = 0xae71
	// ProxyUpstreamMark is SO_MARK on every upstream socket of the node proxy.
	// The capture's output chain in a pod's netns exempts it, so a svc:
	// cluster's upstream, opened in the captured pod's netns
	// (translate.SvcUpstreamBindConfig), is never captured again; the
	// passthrough dials from the host netns, where the guard's proxy cut
	// matches it (translate.PassthroughOriginalDst).
	ProxyUpstreamMark = 0xae7e
)

// The apiserver's own Service stays on kube-proxy's path (Proposal 044,
// Non-goals): it never gets a svc: cluster, its ClusterIP passes through the
// capture listener to kube-proxy's DNAT in every phase, and the guard never
// cuts it, labelled or not.
const (
	APIServerNamespace = "default"
	APIServerName      = "kubernetes"
)

// APIServerService is default/kubernetes.
var APIServerService = types.NamespacedName{Namespace: APIServerNamespace, Name: APIServerName}

// IsAPIServerService reports whether namespace/name is APIServerService.
func IsAPIServerService(namespace, name string) bool {
	return namespace == APIServerNamespace && name == APIServerName
}
