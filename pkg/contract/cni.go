package contract

// Enrollment without touching the pod spec: the chained CNI plugin svclb-cni asks the agent on
// its node whether a pod is enrolled, and the agent answers from its informers.
const (
	// MeshLabel on a Namespace enrolls its pods when it matches the agent's namespace selector
	// (default MeshLabel=MeshEnabled); on a pod, MeshLabel=MeshDisabled opts that pod out.
	// hostNetwork pods are never enrolled.
	MeshLabel    = "svclb.dev/mesh"
	MeshEnabled  = "enabled"
	MeshDisabled = "disabled"
	// KeyNamespaceSelector is the agent ConfigMap key holding the label selector (kubectl
	// syntax) of the enrolled namespaces; absent: DefaultNamespaceSelector.
	KeyNamespaceSelector     = "namespaceSelector"
	DefaultNamespaceSelector = MeshLabel + "=" + MeshEnabled
)

// The plugin on a node.
const (
	// CNIPluginType is the plugin's "type" in a conflist, hence its binary's name.
	CNIPluginType = "svclb-cni"
	// CNIInstallContainer is the node DaemonSet's installer (`svclb-cni install`); while the
	// DaemonSet's template has it, a stopped installer leaves the plugin in place.
	CNIInstallContainer = "cni-install"
	// CNIBinDir and CNIConfDir are the node's CNI directories (containerd's defaults, as on kind).
	CNIBinDir  = "/opt/cni/bin"
	CNIConfDir = "/etc/cni/net.d"
	// CNIConfFile is the installer's own conflist in CNIConfDir: the main plugin's, with
	// svclb-cni appended, named to sort first so the runtime uses it.
	CNIConfFile = "00-svclb.conflist"
	// EnrollSocketDir is a hostPath: the plugin runs in the host's mount namespace (the
	// container runtime execs it), the agent in its container.
	EnrollSocketDir = "/var/run/svclb-cni"
	// EnrollSocket is where the agent answers the plugin (mode 0600).
	EnrollSocket = EnrollSocketDir + "/enroll.sock"
	// EnrollFile (under DemandDir, a hostPath) keeps the pods the plugin enrolled across agent
	// restarts.
	EnrollFile = DemandDir + "/enrolled.json"
	// EnrollNamespacesFile (under DemandDir, read by the plugin in the host's mount namespace)
	// is the agent's view of which namespaces its selector enrolls: the plugin starts the pods
	// of the others without asking the agent, so they start while it is down.
	EnrollNamespacesFile = DemandDir + "/namespaces.json"
)

// Agent metrics of enrollment.
const (
	// MetricEnrolledUncaptured counts running pods on the node that are enrolled by the namespace
	// selector but whose sandbox was not set up by the plugin (they started before it was
	// installed): they are not captured until restarted.
	MetricEnrolledUncaptured = "svclb_agent_enrolled_uncaptured_pods"
	// MetricEnrolledPods counts pods on the node captured through the plugin.
	MetricEnrolledPods = "svclb_agent_enrolled_pods"
	// MetricCNIRequestDuration is the agent's part of each plugin request, by op, enrolled and
	// result: for an enrolled ADD, the latency the plugin adds to pod start is about this plus
	// the plugin's exec and rule install (a few ms).
	MetricCNIRequestDuration = "svclb_agent_cni_request_duration_seconds"
)
