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
// evidence, verdict) and the order the legs run in; early_test.go starts
// the prepares of legs marked early in the background; every other _test.go
// file is one leg, named after it, holding only that leg's workloads,
// prepare and measure (enroll_down_test.go is the enroll leg's agent-down
// check), or a figure (programming_test.go; cnilatency_test.go, opt-in:
// make e2e-svc LEGS=cni-latency, since a run without LEGS filters out the
// label opt-in). Everything they use comes from the framework in
// fixtures/ (cluster, guard, agent, proxy, workload, metrics, diagnostics),
// the record format and the verdicts from e2e/internal/evidence, and what
// several legs share — the refusal measure, the evidence of each run — from
// e2e/internal/measure.
//
// Declaring a leg. A leg file calls defineLeg(leg[W]{...}) (or
// defineLeg(refuseLeg(name, reason, setup, prepare)) for a refusal leg) at
// package level. The fields: name (also its Ginkgo label, and LEGS=name
// selects it), setup, redExpect and greenMeans (restated in the report),
// prepare (deploys the workloads once for both runs and returns W), measure
// (one run: dial, Tally the results into the run, set MetGreen and MetRed
// from what was seen), control, agentConfig, timeout, early (prepare may
// run in the background from the suite's start, earlyParallel at a time in
// the legs' order, while the legs before it run: set only for a prepare that
// deploys workloads of its own, picks no unallocated address and calls no
// DeferCleanup; a prepare not marked early waits until every background
// prepare is done, so no Service is created while it picks an address), and
// two that feed the evidence:
//
//	services func(W) []measure.Dialled // what the leg dials
//	chance   string                    // what can fail by chance: per-attempt timeout and why, false-failure odds
//
// A Dialled is one target: To (host:port, as dialled), Namespace and
// Service (empty for an address no Service holds), Reason (the refusal
// green expects for attempts the proxy closes), RestartsKubeProxy (the leg
// restarts kube-proxy itself) and OutsideRange (To is outside the Service
// range: both runs need tcp.cap_passthrough.downstream_cx_total to rise by
// the node's attempts), KubeProxys (a Service svclb leaves to kube-proxy,
// default/kubernetes: both runs need tcp.cap_passthrough_svc to rise) and
// UpstreamFailures (the proxy's closes of To are failed upstream connects,
// not refusals: outlier). measure.ServicePort(svc, port) declares
// a Service port, .Refused(reason) adds the reason; refuseLeg declares its
// target itself. A leg that restarts a node DaemonSet pod calls
// beforeNodeRestart(ctx, node) right before (its counters start from 0
// again). Results must come from fixtures/workload's Dial (or DialAll,
// DialEach): each echo.Result then names its To and ClientNode, which the
// evidence counts by.
//
// Evidence. Around each run defineLeg does, for every leg:
//
//  1. set the agent's ConfigMap and wait until every node's agent reports it;
//  2. wait until every node's proxy serves it, from the proxy's own
//     /config_dump?include_eds (measure.WaitProgrammed): each capture
//     listener sends the Service range to cap_svc (Phase 1 on) or
//     cap_passthrough_svc, with the refusal access log exactly when Phase 2
//     is on and on_demand exactly in on-demand mode; each dialled Service's
//     svc: clusters absent (Phase 1 off) or active with the endpoints, in the
//     priorities and zones, the agent computes from the current
//     EndpointSlices. No fixed settle: legs that change EndpointSlices
//     (drain, the programming figure) wait on the same signal;
//  3. read every node's proxy /stats and agent refusal counters, and, for
//     each dialled Service the guard cuts (labelled, or in a namespace its
//     --namespace-selector matches: guard.Options.Chooses), every node's
//     `nft list table ip kube-proxy` (its ClusterIP entries) and the
//     guard's re-deletion count;
//  4. run the leg's measure;
//  5. wait (up to measure.CountersSettle) until every node's counters
//     account for its clients' attempts (the capture's chains saw them, every
//     refusal the proxy counted was logged, the agent counted every logged
//     entry), then read them again, the kube-proxy state again, and the
//     agents' refusal logs;
//  6. turn them into the run's checks, per client node: green needs
//     tcp.cap_svc.downstream_cx_total to rise by at least the node's
//     attempts, tcp.cap_passthrough_svc.downstream_cx_total not at all,
//     cluster.<alt_stat_name>.upstream_cx_total (alt_stat_name =
//     contract.StatName) of each dialled Service port by at least the node's
//     replies from it, and the agent's svclb_svc_refused_total of each
//     dialled Service by exactly the node's proxy-closed attempts (with the
//     declared reason); red needs the passthrough chain instead and nothing
//     counted. A target with a Reason also needs, in green, a record of it in
//     the agent's refusal log. A run is judged by the leg's own MetGreen and
//     MetRed and by these checks together; a run during which kube-proxy
//     held any object of a cut Service (before, after, or restored and
//     re-deleted in between, reach-after-resync's own restart aside) is
//     incomplete, whatever it saw.
//
// Order. Ginkgo shuffles top-level containers; defineLeg only registers,
// and the package's init puts the legs into the tree in legOrder
// (legs_test.go), the suite's one list of them, with distinct
// SpecPriority, so they always run in that order. A leg legOrder does not
// list, or a name it lists that no file defines, panics at init: the suite
// and its unit tests fail before they start. The run records the order
// (order.json in the evidence) and the report lists the legs in it. The
// disruptive ones (reach-after-resync restarts a kube-proxy; range-grows
// adds a ServiceCIDR, on-demand restarts a node pod, enroll redeploys the
// node DaemonSet: these three run last) wait until what they disturbed is
// back before they end; the next leg's programmed wait checks the proxies
// anyway.
//
// The legs, in run and report order. "cut" means the Service is labelled
// svclb.dev/kube-proxy=deleted and the guard (pkg/kubeproxyguard) has
// deleted its kube-proxy ClusterIP entries on every node before the leg
// measures (its NodePort path stays kube-proxy's);
// "clients" are the meshed client pods of suite_test.go, one per node. Every
// leg runs through the capture (internal/capture: TPROXY into the node
// proxy's listener in the pod's netns), the agent's sync and xDS
// (agent/syncer.go, agent/batch.go, agent/internal/xdsserver/server.go) and
// the node proxy (Envoy, or nodeproxy/proxy.go and nodeproxy/config.go); the
// fourth column names what the leg exercises beyond that.
//
//	leg                      | file                             | workloads                                                                 | agent/proxy code exercised (package/file)                                                                                                                                        | red means                                                                                     | green means
//	-------------------------|----------------------------------|---------------------------------------------------------------------------|----------------------------------------------------------------------------------------------------------------------------------------------------------------------------------|-----------------------------------------------------------------------------------------------|------------------------------------------------------------------------------------------------------------------------
//	reach                    | reach_test.go                    | Service reach (2 echo backends, cut); clients on every node               | internal/translate/listener.go (cap_svc chain, set_filter_state svc:VIP:port), internal/translate/cluster.go and endpoints.go (svc: cluster, EDS), pkg/svcindex/index.go (Service range) | no reply: the passthrough to the VIP meets kube-proxy's REJECT, the proxy closes every attempt | every attempt from every client gets a backend's reply
//	reach-after-resync       | reach_after_resync_test.go       | Service resync (2 echo backends, cut); the first client by name; its node's kube-proxy pod deleted while it dials | pkg/kubeproxyguard/monitor.go, pass.go, cut.go (re-deletion after kube-proxy's full sync); as reach                                                                              | the guard re-deletes the restored objects and the last attempts all fail                      | the guard re-deleted, the Service is cut again, and every attempt through the restart got a reply
//	refuse-no-endpoints      | refuse_no_endpoints_test.go      | Service noep (selects nothing, cut); 5 attempts per client, all at once   | internal/translate/listener.go (cap_svc access log on UH/NC, gRPC ALS), nodeproxy/als.go, agent/internal/xdsserver/server.go (Classify, svclb_svc_refused_total), e2e/internal/measure | no reply and no refusal counted (Phase 2 off)                                                 | every attempt accepted then closed by the proxy; on each client's node svclb_svc_refused_total{reason="no-endpoints"} +that node's attempts, no other reason; a refusal-log record names the Service and VIP
//	refuse-port-not-declared | refuse_port_not_declared_test.go | Service pnd (1 echo backend, port 80, cut), dialled on port 81            | as refuse-no-endpoints; pkg/svcindex/index.go (Lookup: port-not-declared)                                                                                                        | no reply and no refusal counted                                                               | every attempt refused by the proxy; reason="port-not-declared" +attempts on each node, and a record
//	refuse-no-service        | refuse_no_service_test.go        | no Service: the highest free address of the ServiceCIDRs, port 80         | as refuse-no-endpoints; pkg/svcindex/index.go and ranges.go (Lookup: no-service inside the ServiceCIDR range)                                                                   | no reply and no refusal counted                                                               | every attempt refused by the proxy; reason="no-service" (namespace and service empty) +attempts on each node, and a record
//	drain                    | drain_test.go                    | Service drain (cut); per run 2 echo pods staying serving-but-terminating 2 min after deletion, deleted one then the other, each stage dialled once the agent and kube-proxy have both programmed it; the client on the first worker | internal/translate/endpoints.go (SelectEndpoints: terminating endpoints in bands after every ready one), internal/translate/cluster.go (LoadAssignment priorities), nodeproxy/internal/lb/priority.go | no reply at any stage                                                                          | 2 ready, then 1 ready + 1 terminating: only ready backends reply; 0 ready + 2 terminating: the terminating ones reply
//	affinity                 | affinity_test.go                 | Service aff (sessionAffinity ClientIP, 3 echo backends, not cut); 10 meshed clients on the first worker | internal/translate/cluster.go (RING_HASH), internal/translate/listener.go (tcp_proxy hash_policy source_ip), nodeproxy/internal/lb/balancer.go                                     | each pod sticks, and all pods land on one backend (kube-proxy sees the node's address)        | each pod sticks to one backend, and the pods are not all on one backend
//	itp-local                | itp_local_test.go                | Service itp (internalTrafficPolicy Local, one echo backend per worker, cut); clients on every node | internal/translate/endpoints.go (SelectEndpoints: this node's endpoints only, an empty cluster elsewhere); the refusal path of refuse-no-endpoints                                   | no reply from any node                                                                        | worker clients reach only their own node's backend; the control plane's client is refused, counted no-endpoints on its node and logged
//	topology                 | topology_test.go                 | Service topo (trafficDistribution PreferClose, one echo backend in zone-a and one in zone-b, cut); clients on every node | internal/translate/endpoints.go (zone bands from hints or PreferClose), internal/translate/cluster.go (LoadAssignment localities), nodeproxy/internal/lb/priority.go               | no reply from any node                                                                        | zone-a and zone-b clients reach only their zone; the zone-c client spills to the others
//	passthrough              | passthrough_test.go              | echo Deployment pass (1 pod, no Service); clients dial its pod IP:8080    | internal/translate/listener.go (default_filter_chain cap_passthrough, PassthroughOriginalDst)                                                                                   | control leg: red must look like green                                                          | every attempt replies and no backend saw the client's own address (the proxy carried it)
//	attribution              | attribution_test.go              | Services attr-a and attr-b (same 2 echo backends, cut); clients on every node dial each on 80 and on undeclared 81, in different counts | internal/translate/cluster.go (alt_stat_name contract.StatName), nodeproxy/proxy.go (cluster.<alt_stat_name>.* stats), agent/internal/xdsserver/server.go (Classify, record: svclb_svc_refused_total{namespace,service} and the refusal log line) | no reply; no per-Service stat, refusal count or refusal log line moves                        | per node, cluster.svc.<ns>.attr-a.80 / attr-b.80 upstream_cx_total rise by exactly each Service's dials; port-not-declared counted per Service exactly and logged, each record naming its Service and VIP
//	phase0-split             | phase0_split_test.go             | Service split (1 echo backend, cut); clients on every node dial its VIP:80 and the backend pod's IP:8080 (outside the range) | internal/translate/listener.go (filter_chain_matcher: range → cap_passthrough_svc or cap_svc, default cap_passthrough; stat prefixes), nodeproxy/proxy.go (selectChain, tcp.<stat_prefix>.downstream_cx_total) | Phase 0, the measurement under test: cap_passthrough_svc counts exactly the range dials, cap_passthrough exactly the rest, cap_svc nothing | exactly the counted range traffic moves to cap_svc and is answered; cap_passthrough unchanged; the listener counts every connection once
//	named-port               | named_port_test.go               | Service np (cut): port 80 → targetPort web, declared as 8080 by np-a and 9090 by np-b; port 81 → a name no pod declares | internal/translate/endpoints.go (SelectEndpoints: the slice's port of the Service port's name), internal/translate/cluster.go (one cluster per Service port); the refusal path of refuse-no-endpoints | no reply and no refusal counted                                                               | every proxy assigns np-a:8080 and np-b:9090 to port 80 and nothing to 81; port 80 reaches both pods; port 81 is refused no-endpoints
//	outlier                  | outlier_test.go                  | Service outlier (3 Ready echo pods, one with the targetPort closed; not cut); the client on the first worker | internal/translate/cluster.go (outlier_detection consecutive_local_origin_failure, max_ejection_percent 99), nodeproxy/internal/lb/outlier.go (Detector), nodeproxy/outlierstats.go, nodeproxy/proxy.go and config.go | about a third of the attempts keep failing (kube-proxy keeps picking the closed endpoint); nothing ejected | after the configured 5 failures the closed endpoint is ejected (ejections_enforced_total +1, ejections_active 1 on the client's node) and the next 20 attempts all reach the open ones
//	recreate                 | recreate_test.go                 | Service rec (2 echo backends, cut) at a chosen ClusterIP, deleted and created again at another while the client on the first worker dials the old VIP; put back after each run | agent/batch.go (a deleted Service's clusters and assignments withdrawn), pkg/svcindex/index.go (Lookup: the old VIP is no-service), agent/internal/xdsserver/server.go (Classify) | no reply from either VIP; nothing counted                                                     | the dialling client gets replies, then refusals; no proxy keeps svc:<old VIP>:80; the old VIP is refused, counted and logged no-service; the new VIP replies
//	new-service              | new_service_test.go              | echo Deployment newsvc (2 pods, Ready first); per run Service newsvc (cut) and its unguarded twin newsvc-twin at ClusterIPs picked in prepare; the meshed client and a client that is not meshed on the first worker dial them from before their creation until the first reply | agent/intake.go and batch.go (a Service's first sync: svc: cluster and its load assignment pushed), internal/translate/cluster.go and endpoints.go; kube-proxy on the twin as the reference | the meshed client never replied through a svc: cluster, and once the guard cut the Service not at all | the meshed client's first reply came through the new Service's svc: cluster and it keeps replying once cut; both times from creation to first reply (agent, kube-proxy) in the counters
//	apiserver                | apiserver_test.go                | Service default/kubernetes; the meshed client on every node makes TLS handshakes with its ClusterIP:443 | the agent's Service filter (default/kubernetes is not svclb's: no svc: cluster), internal/translate/listener.go (its VIP a /32 to cap_passthrough_svc in both phases) | control leg: red must look like green                                                          | tcp.cap_passthrough_svc.downstream_cx_total rises by the handshakes on each node; no node proxy holds a svc: cluster for its ClusterIP; every handshake completes with the certificate verified for kubernetes.default.svc
//	dns                      | dns_test.go                      | Service dns; the meshed client on every node resolves its FQDN over UDP and over TCP | internal/capture/capture.go (outputRules: UDP never captured, TCP 53 returned unmarked); no agent code                                                                            | control leg: red must look like green                                                          | every lookup over each transport went to kube-dns' ClusterIP:53 and answered the Service's ClusterIP; kube-dns' svc: cluster carried no connection
//	hostile-loop             | hostile_loop_test.go             | a plain pod (not meshed) on another node dials the first worker's meshed client at <podIP>:18001; echo Deployment hloop (1 pod, no Service): every client dials its pod IP:8080 | internal/capture/capture.go (inputRule: TCP to :18001 from outside lo is reset), internal/translate/listener.go (the listener binds 127.0.0.1) | control leg: red must look like green | every dial of <podIP>:18001 is refused; the target node's passthrough upstream_cx_total rises by at most 1 and its proxy's fds stay flat; every passthrough attempt replies
//	range-grows              | range_grows_test.go              | per run ServiceCIDR svclb-e2e-grows (10.97.0.0/24) added, then Service grows (2 echo backends, cut, ClusterIP 10.97.0.10); clients on every node; both deleted after the run | pkg/svcindex/index.go and ranges.go (ServiceCIDR informer, Range), internal/translate/listener.go (the Service-range trie matcher), the node proxy's listener update in place (nodeproxy/config.go) | no reply                                                                                      | every client replies through its node's cap_svc chain (the evidence's per-node checks); no agent, proxy, guard or kube-proxy container restarted
//	on-demand                | on_demand_test.go                | Service od (2 echo backends, cut), Service od-idle (never dialled), the client on the first worker; green sets ConfigMap cds=on-demand | agent/cdsmode.go, admission.go, pending.go, demandfile.go (on-demand CDS, persisted demand), agent/metrics.go (svclb_ondemand_refused_total), internal/translate/listener.go (tcp_proxy on_demand, OnDemandTimeout), nodeproxy/ondemand.go | no reply; nothing demanded; nothing refused on demand                                          | no svc: cluster before the first connection, which is held and answered; demand rose; the proxy holds only the dialled cluster (no other node does); an unallocated VIP is held ~5 s then closed and counted no-service; after a node pod restart the demand is restored before any connection
//	enroll                   | enroll_test.go, enroll_down_test.go | svclb-cni on every node (node DaemonSet with manifests.CNIOptions, for this leg only); namespace svclb-enroll labelled svclb.dev/mesh=enabled with a plain client Deployment (no init container, label or capability) on the first worker; Service enroll (2 echo backends, labelled cut) and Service svclb-enroll/nsmode (2 echo backends, no label: the guard's --namespace-selector cuts it); a plain control pod in the legs' namespace; prepared once: the agent's socket removed, a pod created, the agent restarted | cmd/svclb-cni and internal/cniplugin (ADD/CHECK/DEL), internal/capture (Install on the sandbox's netns), internal/enroll (the plugin↔agent socket), agent/enrollment.go and enrollfile.go (decision from informers, listener on the plugin's netns path), internal/cniinstall (00-svclb.conflist), pkg/kubeproxyguard/namespaces.go (WatchServicesByNamespace) | the enrolled client is captured but its connections to both VIPs pass through to kube-proxy's REJECT: no reply | every attempt to both Services replies through the client node's svc: clusters; the agent lists the enrolled client with its listener, not the control; the pod created while the agent was unreachable had its sandbox refused (an error naming the socket) and became Ready only after the agent's restart, enrolled
//	cni-latency (a figure, opt-in) | cnilatency_test.go        | svclb-cni on every node; namespaces svclb-cnilat-on (enrolled) and svclb-cnilat-off, 50 plain pods each, 2 of each kind at a time on the workers; LEGS=cni-latency only (label opt-in) | the whole sandbox with svclb-cni in the chain: the plugin's exec, the agent's answer, internal/capture Install and the agent's listener for enrolled pods, one round trip for the others | —                                                                                             | every pod started and every enrolled one went through the plugin; containerd's RunPodSandbox p50/p99 per kind go to cni-latency.json and the report
//	programming (a figure)   | programming_test.go              | echo Deployment prog scaled 1→2→3→2→1→2→1                                 | agent/intake.go and agent/metrics.go (svclb_network_programming_duration_seconds from the EndpointSlice's last-change-trigger-time) against kube-proxy's histogram                 | —                                                                                             | both the agent and kube-proxy observed the changes; their p50/p99 go to programming.json
//
// Evidence (per-leg JSON with each run's flows per client node, checks per
// node, kube-proxy cut and refusal records; phase wall times; environment)
// goes to $SVCLB_ARTIFACTS (default _artifacts/); e2e/cmd/report renders it:
// report.md's header names the selected legs, and the run PASSED only if
// every selected leg ran and passed. A failed spec or setup step also
// leaves fixtures/diagnostics' dump under failures/.
package e2e
