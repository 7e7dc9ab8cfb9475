// Package e2e holds svclb's acceptance legs as a Ginkgo v2 suite set up
// through sigs.k8s.io/e2e-framework env funcs. Each leg runs red (the agent's
// Phase flags off: today's behaviour) and then green (on) on the same
// workloads; it passes only if red shows the failure the leg expects and
// green the fix. A red run is judged by the green condition too: a leg that
// is already green with the agent off proves nothing.
//
// The suite needs the kind cluster of kindconfig/ (`make cluster`) and the
// images of cmd/ (`make images`); `make e2e-svc` (e2e/run.sh) provides both,
// runs it and renders the reports. Without SVCLB_E2E=1 the suite skips, so
// `go test ./...` needs no cluster.
//
// Layout. suite_test.go is TestMain (config from SVCLB_* variables, the
// setup env funcs: connect, record the environment, deploy the guard and the
// node DaemonSet, the legs' namespace, one meshed client per node) and
// TestE2E; leg_test.go is the leg type, defineLeg (red run, green run,
// verdict) and the judgement of a control leg; every other _test.go file is
// one leg, named after it, holding only that leg's workloads, prepare and
// measure. Everything they use comes from the framework in fixtures/
// (cluster, guard, agent, proxy, workload, metrics, diagnostics), the record
// format from e2e/internal/evidence, and the measurement the three refusal
// legs share from e2e/internal/measure.
//
// The legs, in report order. "cut" means the Service is labelled
// svclb.dev/kube-proxy=deleted and the guard (pkg/kubeproxyguard) has
// deleted its kube-proxy objects on every node before the leg measures;
// "clients" are the meshed client pods of suite_test.go, one per node. Every
// leg runs through the capture (fixtures/capture: TPROXY into the node
// proxy's listener in the pod's netns), the agent's sync and xDS
// (agent/syncer.go, agent/batch.go, agent/internal/xdsserver/server.go) and
// the node proxy (Envoy, or nodeproxy/proxy.go and nodeproxy/config.go); the
// fourth column names what the leg exercises beyond that.
//
//	leg                      | file                             | workloads                                                                 | agent/proxy code exercised (package/file)                                                                                                                                        | red means                                                                                     | green means
//	-------------------------|----------------------------------|---------------------------------------------------------------------------|----------------------------------------------------------------------------------------------------------------------------------------------------------------------------------|-----------------------------------------------------------------------------------------------|------------------------------------------------------------------------------------------------------------------------
//	reach                    | reach_test.go                    | Service reach (2 echo backends, cut); clients on every node               | internal/translate/listener.go (cap_svc chain, set_filter_state svc:VIP:port), internal/translate/cluster.go and endpoints.go (svc: cluster, EDS), pkg/svcindex/index.go (Service range) | no reply: the passthrough to the VIP meets kube-proxy's REJECT, the proxy closes every attempt | every attempt from every client gets a backend's reply
//	reach-after-resync       | reach_after_resync_test.go       | Service resync (2 echo backends, cut); the first client by name; its node's kube-proxy pod deleted while it dials | pkg/kubeproxyguard/monitor.go, pass.go, cut.go (re-deletion after kube-proxy's full sync); as reach                                                                              | the guard re-deletes the restored objects and the last attempts all fail                      | the guard re-deleted, the Service is cut again, and every attempt through the restart got a reply
//	refuse-no-endpoints      | refuse_no_endpoints_test.go      | Service noep (selects nothing, cut); 5 attempts per client, all at once   | internal/translate/listener.go (cap_svc access log on UH/NC, gRPC ALS), nodeproxy/als.go, agent/internal/xdsserver/server.go (Classify, svclb_svc_refused_total), e2e/internal/measure | no reply and no refusal counted (Phase 2 off)                                                 | every attempt accepted then closed by the proxy; svclb_svc_refused_total{reason="no-endpoints"} +attempts, no other reason
//	refuse-port-not-declared | refuse_port_not_declared_test.go | Service pnd (1 echo backend, port 80, cut), dialled on port 81            | as refuse-no-endpoints; pkg/svcindex/index.go (Lookup: port-not-declared)                                                                                                        | no reply and no refusal counted                                                               | every attempt refused by the proxy; reason="port-not-declared" +attempts
//	refuse-no-service        | refuse_no_service_test.go        | no Service: the highest free address of the ServiceCIDRs, port 80         | as refuse-no-endpoints; pkg/svcindex/index.go and ranges.go (Lookup: no-service inside the ServiceCIDR range)                                                                   | no reply and no refusal counted                                                               | every attempt refused by the proxy; reason="no-service" (namespace and service empty) +attempts
//	drain                    | drain_test.go                    | Service drain (cut); per run 2 echo pods staying serving-but-terminating 60 s after deletion, deleted one then the other; the client on the first worker | internal/translate/endpoints.go (SelectEndpoints: terminating endpoints in bands after every ready one), internal/translate/cluster.go (LoadAssignment priorities), nodeproxy/internal/lb/priority.go | no reply at any stage                                                                          | 2 ready, then 1 ready + 1 terminating: only ready backends reply; 0 ready + 2 terminating: the terminating ones reply
//	affinity                 | affinity_test.go                 | Service aff (sessionAffinity ClientIP, 3 echo backends, not cut); 10 meshed clients on the first worker | internal/translate/cluster.go (RING_HASH), internal/translate/listener.go (tcp_proxy hash_policy source_ip), nodeproxy/internal/lb/balancer.go                                     | each pod sticks, and all pods land on one backend (kube-proxy sees the node's address)        | each pod sticks to one backend, and the pods are not all on one backend
//	itp-local                | itp_local_test.go                | Service itp (internalTrafficPolicy Local, one echo backend per worker, cut); clients on every node | internal/translate/endpoints.go (SelectEndpoints: this node's endpoints only, an empty cluster elsewhere); the refusal path of refuse-no-endpoints                                   | no reply from any node                                                                        | worker clients reach only their own node's backend; the control plane's client is refused and counted no-endpoints
//	topology                 | topology_test.go                 | Service topo (trafficDistribution PreferClose, one echo backend in zone-a and one in zone-b, cut); clients on every node | internal/translate/endpoints.go (zone bands from hints or PreferClose), internal/translate/cluster.go (LoadAssignment localities), nodeproxy/internal/lb/priority.go               | no reply from any node                                                                        | zone-a and zone-b clients reach only their zone; the zone-c client spills to the others
//	passthrough              | passthrough_test.go              | echo Deployment pass (1 pod, no Service); clients dial its pod IP:8080    | internal/translate/listener.go (default_filter_chain cap_passthrough, PassthroughOriginalDst)                                                                                   | control leg: red must look like green                                                          | every attempt replies and no backend saw the client's own address (the proxy carried it)
//	on-demand                | on_demand_test.go                | Service od (2 echo backends, cut), Service od-idle (never dialled), the client on the first worker; green sets ConfigMap cds=on-demand | agent/cdsmode.go, admission.go, pending.go, demandfile.go (on-demand CDS, persisted demand), agent/metrics.go (svclb_ondemand_refused_total), internal/translate/listener.go (tcp_proxy on_demand, OnDemandTimeout), nodeproxy/ondemand.go | no reply; nothing demanded; nothing refused on demand                                          | no svc: cluster before the first connection, which is held and answered; demand rose; the proxy holds only the dialled cluster (no other node does); an unallocated VIP is held ~5 s then closed and counted no-service; after a node pod restart the demand is restored before any connection
//	programming (a figure)   | programming_test.go              | echo Deployment prog scaled 1→2→3→2→1→2→1                                 | agent/intake.go and agent/metrics.go (svclb_network_programming_duration_seconds from the EndpointSlice's last-change-trigger-time) against kube-proxy's histogram                 | —                                                                                             | both the agent and kube-proxy observed the changes; their p50/p99 go to programming.json
//
// Evidence (per-leg JSON, phase wall times, environment) goes to
// $SVCLB_ARTIFACTS (default _artifacts/); e2e/cmd/report renders it. A failed
// spec or setup step also leaves fixtures/diagnostics' dump under
// failures/.
package e2e
