package contract

// The agent's log line for each refusal it counts in MetricSvcRefused
// (agent/internal/xdsserver Server.record). cmd/svclb-agent logs JSON
// (slog's JSON handler): the line's "msg" is LogRefusal and its other keys
// are these; the suites read the line by these names.
const (
	LogRefusal = "connection refused"

	LogKeyReason    = LabelReason
	LogKeyNamespace = LabelNamespace
	LogKeyService   = LabelService
	// LogKeyDestination is the address the client dialled (VIP:port).
	LogKeyDestination = "destination"
	// LogKeySource is the client's address.
	LogKeySource = "source"
	// LogKeySourcePod is the client pod (namespace/name): for a refusal after accept, the
	// pod the agent finds with LogKeySource's address on its node ("" when none has it);
	// for a refusal at the SYN (flag RST), the pod whose netns table counted it.
	LogKeySourcePod = "source_pod"
	// LogKeyFlag is the proxy's response flag: UH or NC.
	LogKeyFlag = "flag"
	// LogKeyCluster is the cluster the proxy had chosen ("" for NC).
	LogKeyCluster = "cluster"
)
