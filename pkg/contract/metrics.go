package contract

// The agent's Prometheus series (agent/doc.go says what each one counts). The
// agent registers them under these names and the suites read them by these
// names.
const (
	// MetricSvcRefused is svclb_svc_refused_total{reason,namespace,service}:
	// Phase 2's refusals, counted from the proxy's access log (reasons
	// ReasonNoEndpoints, ReasonPortNotDeclared, ReasonNoService,
	// ReasonNotProgrammed).
	MetricSvcRefused = "svclb_svc_refused_total"
	// MetricSvcConnections is
	// svclb_svc_connections_total{source_namespace,source_workload,namespace,service,port}:
	// the connections cap_svc connected to a Service port's endpoint, by the meshed pod that
	// made them (its namespace and workload, SourceWorkloadName) and the Service port, counted
	// from the access log ConnectionLogName. At most MaxConnectionSeries label sets; the
	// connections of any further one count in the one series whose source_workload is
	// SourceOverflow (every other label empty). A source address that names no pod on the
	// node counts with source_namespace "" and source_workload SourceUnknown.
	MetricSvcConnections = "svclb_svc_connections_total"
	// MetricXDSNacks counts xDS updates the node proxy rejected.
	MetricXDSNacks = "svclb_xds_nacks_total"

	MetricSnapshotVersion   = "svclb_snapshot_version"
	MetricSnapshotResources = "svclb_snapshot_resources"
	MetricSnapshotRejected  = "svclb_snapshot_rejected_total"
	MetricClusters          = "svclb_clusters"
	MetricEndpoints         = "svclb_endpoints"
	MetricListeners         = "svclb_listeners"
	MetricPushDuration      = "svclb_push_duration_seconds"
	// MetricProgrammingDuration is the agent's counterpart of kube-proxy's
	// kubeproxy_network_programming_duration_seconds (same buckets).
	MetricProgrammingDuration = "svclb_network_programming_duration_seconds"

	// On-demand CDS (docs/architecture.md, "On-demand CDS mode").
	MetricOnDemandAdmitted = "svclb_ondemand_admitted_total"
	// MetricOnDemandRefused is svclb_ondemand_refused_total{reason}: names
	// the proxy asked for that were refused (reasons ReasonMalformed,
	// ReasonExternal, ReasonNoService, ReasonPortNotDeclared, ReasonOverCap,
	// ReasonKubeProxy).
	MetricOnDemandRefused  = "svclb_ondemand_refused_total"
	MetricOnDemandDemanded = "svclb_ondemand_demanded"
	MetricOnDemandPending  = "svclb_ondemand_pending"

	// MetricServiceRangeKnown is 1 while the agent knows the Service range
	// (a ServiceCIDR with an IPv4 CIDR, or --service-range), 0 while it does
	// not: then no destination is treated as a Service and every captured
	// connection passes through to kube-proxy.
	MetricServiceRangeKnown = "svclb_service_range_known"

	// MetricSettingsErrors is svclb_agent_settings_errors{key}: per key of AgentConfigMap, 1
	// while its value does not parse (the setting keeps its last good value; /status
	// "settingsErrors" names it), else 0. Label key is KeyPhase1, KeyPhase2, KeyCDS,
	// KeyNamespaceSelector, or SettingsKeyUnknown, which counts the keys the agent does not
	// know (one series for all of them: the ConfigMap's keys are not the metric's to name).
	MetricSettingsErrors = "svclb_agent_settings_errors"
	SettingsKeyUnknown   = "unknown"
)

// Label names of the agent's series.
const (
	LabelReason    = "reason"
	LabelNamespace = "namespace"
	LabelService   = "service"
	LabelKey       = "key"

	// MetricSvcConnections' labels: the source pod's namespace and workload, and the Service
	// port's number (LabelNamespace and LabelService name the Service).
	LabelSourceNamespace = "source_namespace"
	LabelSourceWorkload  = "source_workload"
	LabelPort            = "port"
)

// MetricSvcConnections' bound and its reserved source_workload values (no workload is named
// so: a Kubernetes name never starts with "_").
const (
	// MaxConnectionSeries bounds MetricSvcConnections' label sets on one agent: a meshed pod
	// on the node can dial every Service port, and a Deployment scaled through many
	// ReplicaSets still has one name, so the bound is workloads × Service ports it talks to.
	MaxConnectionSeries = 4096
	// SourceOverflow is the source_workload of the one series that counts the connections of
	// every label set beyond MaxConnectionSeries.
	SourceOverflow = "_overflow"
	// SourceUnknown is the source_workload of connections whose source address names no pod
	// the agent knows on its node (source_namespace "").
	SourceUnknown = "_unknown"
)

// Refusal reasons: the values of LabelReason.
const (
	// ReasonNoEndpoints: UH on a published svc: cluster (no usable endpoint).
	ReasonNoEndpoints = "no-endpoints"
	// ReasonPortNotDeclared: the destination is a Service's ClusterIP on a
	// port the Service does not declare.
	ReasonPortNotDeclared = "port-not-declared"
	// ReasonNoService: the destination is in the Service range and no
	// Service owns it.
	ReasonNoService = "no-service"
	// ReasonNotProgrammed: NC on a known Service port the proxy had no
	// cluster for yet (a programming-latency signal, not a client error).
	ReasonNotProgrammed = "not-programmed"

	// On-demand only (MetricOnDemandRefused).

	// ReasonMalformed: not a cluster name the agent could ever publish.
	ReasonMalformed = "malformed"
	// ReasonExternal: outside the Service range.
	ReasonExternal = "external"
	// ReasonOverCap: a known Service port beyond --on-demand-max.
	ReasonOverCap = "over-cap"
	// ReasonKubeProxy: a port of APIServerService, which stays kube-proxy's
	// and never gets a svc: cluster.
	ReasonKubeProxy = "kube-proxy"
)

// MetricGuardRedeletionLatency is the guard's histogram of the time from
// kube-proxy restoring a cut Service's object to the guard deleting it again.
const MetricGuardRedeletionLatency = "svclb_guard_redeletion_latency_seconds"
