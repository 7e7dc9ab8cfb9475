// Package agent is the svclb node agent (Proposal 044, Option A): it turns the cluster's
// Services and EndpointSlices into svc:<VIP>:<port> clusters, and the captured pods on its node
// into capture listeners, and serves them to the node proxy over delta ADS on a unix socket.
// It also receives the proxy's access logs (gRPC ALS): it names each refusal's reason and
// counts each connection by the pod that made it.
//
// Run is the whole agent; cmd/svclb-agent only parses flags.
//
// Phases: Phase 1 (svc: clusters) and Phase 2 (refusal access log) start from Config and then
// follow ConfigMap svclb-agent in namespace svclb-system, keys "phase1" and "phase2" (exactly
// "true" or "false"; a missing key takes the Config default; deleting the ConfigMap returns to
// the defaults). A flip re-renders the listeners in place: nothing is recreated.
//
// The ConfigMap's keys (settings.go parses them all: phase1, phase2, cds, namespaceSelector,
// refusal): a
// value that does not parse never changes its setting, which keeps its last good value (at
// start-up, with none yet, the default, logged as an error); a key the agent does not know
// changes nothing. Both are reported per key in /status "settingsErrors", in
// svclb_agent_settings_errors{key}, and in one warning per change. docs/architecture.md lists
// the accepted values.
//
// Refusal (key "refusal", "close" by default or "reset"): with reset, while both phases are
// on, every captured pod's netns gets a refuse table (internal/refuse) that resets the caller's
// SYN (ECONNREFUSED) before the proxy accepts it, for each Service port with no endpoint for
// the node and for every port a served Service's VIP does not declare; with close (or a phase
// off) the tables go and such a connection is accepted and closed. refuser.go keeps the sets
// around each push: what stops being refused leaves before the push that may serve it, what
// starts being refused enters after the push that stops serving it. Their per-element
// counters are read every contract.RefuseCountEvery (and as an element, a VIP or a table goes)
// into svclb_svc_refused_total{reason="no-endpoints"|"port-not-declared"} and a refusal log
// line (flag RST, the VIP:port, the pod) per pod, rate-limited.
//
// CDS mode: proactive (default) publishes a svc: cluster for every known Service port;
// on-demand publishes only the names the node proxy asks for on its delta CDS subscription
// (tcp_proxy on_demand over ADS), each classified with the Service index and admitted only if
// it is a known Service port, up to Config.OnDemandMax. Config.CDSMode is the default until
// the ConfigMap key "cds" ("proactive" or "on-demand") says otherwise. Refused names wait,
// at most contract.OnDemandPendingMax of them, and are admitted once their Service appears;
// one over the bound is answered to the proxy as not existing and only its address is kept,
// so a Service created there later is still published (pending.go). The admitted names persist in
// Config.DemandFile and are restored before the first snapshot. docs/architecture.md,
// "On-demand CDS mode", is the contract.
//
// HTTP (Config.HTTPAddr, by default and in the DaemonSet 127.0.0.1:9750, which no pod
// reaches: read it with "svclb-agent get PATH" in the container; port 0 picks a free one,
// which Config.Ready is told; the limits of
// internal/httpserve): /metrics (Prometheus), /healthz (200 once the first snapshot is
// published, 503 before), and /status, a JSON document whose types and keys are package
// pkg/agentstatus's (its doc shows one).
//
// A test that flips a phase waits until every node's /status shows the new phases.
//
// Metrics (names in pkg/contract): svclb_svc_refused_total{reason,namespace,service} (reasons no-endpoints
// and port-not-declared, which with refusal reset also count the SYNs the pods' refuse tables
// reset, no-service, and not-programmed for an NC on a known Service port the
// proxy had no cluster for yet), svclb_snapshot_version, svclb_snapshot_resources,
// svclb_clusters, svclb_endpoints, svclb_listeners, svclb_push_duration_seconds,
// svclb_network_programming_duration_seconds (kube-proxy's buckets, from the EndpointSlice's
// endpoints.kubernetes.io/last-change-trigger-time to the push), svclb_snapshot_rejected_total,
// svclb_xds_nacks_total, svclb_ondemand_admitted_total, svclb_ondemand_refused_total{reason}
// (malformed, external, no-service, port-not-declared, over-cap, kube-proxy),
// svclb_ondemand_demanded, svclb_ondemand_pending (refused names the proxy keeps subscribed),
// svclb_ondemand_forgotten_total and svclb_ondemand_forgotten_addresses (names over the pending
// bound, answered as not existing), svclb_log_lines_suppressed_total{log} (refusal lines held
// back by their rate limits, summarised instead),
// svclb_service_range_known (1/0), svclb_agent_settings_errors{key} (1 while the ConfigMap key's
// value is bad; key="unknown" counts the keys the agent does not know),
// svclb_node_local_refused_total (connections to node-local destinations the capture listeners'
// cap_refused closed, from the access log svclb_node_local; each is also logged, reason
// node-local, a burst of 20 lines then one a second),
// svclb_svc_connections_total{source_namespace,source_workload,namespace,service,port} (the
// connections cap_svc connected, from the access log svclb_connections, by the source pod's
// workload found among this node's pods by address, podsources.go; at most
// contract.MaxConnectionSeries label sets, the rest in one source_workload="_overflow" series;
// docs/architecture.md, "Connections by source").
//
// The apiserver's Service (contract.APIServerService) stays kube-proxy's: no svc: cluster, and
// its ClusterIP passes through the capture listener in every phase. A Service range the agent
// does not know (no IPv4 ServiceCIDR, no --service-range) makes every captured connection pass
// through; the agent warns once per change and svclb_service_range_known is 0.
//
// Pushes: a change after a quiet period is pushed at once; changes within Config.Debounce of
// a push are coalesced into the next one (kube-proxy's bounded-frequency runner). Only while
// changes keep coming at least once a debounce does the window widen, doubling up to one
// second (coalesce.go: each push costs the xDS cache O(all resources)). Each push carries
// only what changed (per-resource delta over go-control-plane LinearCaches).
//
// Until its caches have synced and the first snapshot is built, the agent does not open the
// xDS socket, so a restarted agent never hands the proxy an empty configuration; the proxy keeps
// its last one. When the apiserver is unreachable the informers retry and the last snapshot
// keeps being served.
//
// sessionAffinity ClientIP becomes RING_HASH hashing the source IP; timeoutSeconds has no Envoy
// counterpart (a client keeps its backend while the endpoint set is unchanged).
package agent
