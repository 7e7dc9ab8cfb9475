package contract

// Node access for the suites on a cluster whose nodes are not containers of the local Docker
// engine: a privileged DaemonSet whose container chroots into the node's root and runs a
// command there (cmd/svclb-nodeexec, fixtures/cluster NodeExec). It exists while a suite runs.
const (
	// NodeAccessName names the node-access DaemonSet (in Namespace) and its pods' app label.
	NodeAccessName = "svclb-node-access"
	// NodeAccessContainer is its one container.
	NodeAccessContainer = "nodeexec"
	// NodeExecBinary is the binary's path in its image (kindconfig/images.sh).
	NodeExecBinary = "/svclb-nodeexec"
	// HostRoot is where the container mounts the node's / (hostPath), the root it chroots into.
	HostRoot = "/host"
)
