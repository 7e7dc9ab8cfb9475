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
// TestE2E; leg_test.go is the suite's legs (a leg.Suite: the framework's
// fixtures/leg runs red, green, evidence and verdict) and refuseLeg; legs_test.go is legOrder, the order the legs run in;
// legs_doc_test.go generates docs/legs.md from the legs; early_test.go
// starts the prepares of legs marked early in the background; every other
// _test.go file is one leg, named after it, holding only that leg's value,
// workloads, prepare and measure (enroll_down_test.go is the enroll leg's
// agent-down check), or a figure. Everything they use comes from the
// framework in fixtures/ (cluster, guard, agent, proxy, workload, metrics,
// diagnostics), the record format and the verdicts from
// fixtures/evidence, and what several legs share — the refusal
// measure, the evidence of each run — from fixtures/measure.
//
// The legs. docs/legs.md lists every leg in the order it runs, with its
// file, workloads, the agent and proxy code it exercises and what red and
// green mean. It is generated from the legs themselves: `make legs-doc`
// writes it, and TestLegsDoc (a unit test, in make unit and make test)
// fails while it is not what the legs make of it now.
//
// Adding a leg is two edits: a file that declares the leg, and its name in
// legOrder (legs_test.go) at the place it should run; `make legs-doc` then
// rewrites docs/legs.md. A leg defined but not in legOrder, or listed but
// defined nowhere, panics at init.
//
// Declaring a leg. A leg file calls leg.Define(legs, leg.Leg[W]{...}) (or
// leg.Define(legs, refuseLeg(reason, leg.Leg[measure.Target]{...})) for a
// refusal leg, which sets its expectations, chance and measure) at package
// level. The leg value holds everything about the leg, its texts included.
// The fields: Name (also its Ginkgo label, and LEGS=name selects it), Setup,
// RedExpect and GreenMeans (restated in the report; docs/legs.md shows the
// last two), Workloads and Exercises (docs/legs.md alone: what the leg
// deploys and who dials it, and the agent and proxy code it exercises
// beyond what every leg runs through), Prepare (deploys the workloads once
// for both runs and returns W), Measure (one run: dial, Tally the results
// into the run, set MetGreen and MetRed from what was seen), Control,
// AgentConfig, Timeout, Needs (what the cluster must have: schedulable
// workers, zones; lacking it the leg is skipped in both runs, its record
// saying why), Early (Prepare may run in the background from the
// suite's start, leg.EarlyParallel at a time in the legs' order, while the legs
// before it run: set only for a prepare that deploys workloads of its own,
// picks no unallocated address and calls no DeferCleanup; a prepare not
// marked early waits until every background prepare is done, so no Service
// is created while it picks an address), and two that feed the evidence:
//
//	Services func(W) []measure.Dialled // what the leg dials
//	Chance   string                    // what can fail by chance: per-attempt timeout and why, false-failure odds
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
// Evidence. Around each run fixtures/leg does, for every leg:
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
//     namespace selector, the agent's, matches: guard.Options.Chooses), every node's
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
// Order. Ginkgo shuffles top-level containers; leg.Define only registers,
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
// Figures are specs that measure rather than judge red and green, outside
// legOrder and docs/legs.md: programming_test.go (echo Deployment prog
// scaled 1→2→3→2→1→2→1; the agent's svclb_network_programming_duration_seconds
// against kube-proxy's histogram, p50/p99 to programming.json) runs after
// every leg; cnilatency_test.go (50 plain pods each in an enrolled and a
// plain namespace; containerd's RunPodSandbox p50/p99 per kind to
// cni-latency.json) is opt-in: make e2e-svc LEGS=cni-latency, since a run
// without LEGS filters out the label opt-in.
//
// Evidence (per-leg JSON with each run's flows per client node, checks per
// node, kube-proxy cut and refusal records; the legs' order; phase wall
// times; environment)
// goes to $SVCLB_ARTIFACTS (default _artifacts/); e2e/cmd/report renders it:
// report.md's header names the selected legs, and the run PASSED only if
// every selected leg ran and passed. A failed spec or setup step also
// leaves fixtures/diagnostics' dump under failures/.
package e2e
