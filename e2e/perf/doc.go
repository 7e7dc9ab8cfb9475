// Package perf is the agent side by side with kube-proxy on the kind cluster
// (the goals are in docs/perf.md), every figure measured on both paths in the same run:
//
//   - endpoint change → traffic moves (TestEndpointChange): two echo
//     backends behind a guarded Service (kube-proxy's objects cut) dialled by a
//     meshed client, through the agent and its node proxy, and its unguarded
//     twin (same selector) dialled by a client that is not meshed on the same
//     node, through kube-proxy. One backend's readiness is flipped through a
//     readiness gate; each change is timed from two clocks: when the test's
//     EndpointSlice watch delivers the change of that path's Service (the
//     goals' clock; it can come after the agent acted), and just before the gate's
//     API write (it precedes both paths). Each stops at the first reply from
//     the backend that became ready, or the last reply from the one that went
//     away. Both clients start an attempt every 10 ms
//     whatever the previous one does (perf-client dial-every), so the answer
//     is known to about that.
//   - new Service → first success (TestNewService): a Service and its twin
//     created at addresses the clients already dial; from each one's first
//     EndpointSlice event with a ready endpoint to the first reply.
//   - at scale (TestScale, one subtest per size): N selector-less Services
//     with hand-made EndpointSlices; on every node the time until kube-proxy's
//     nftables and the node proxy hold them all, the CPU of their containers
//     over that time (cgroup counters read on the node) and their RSS; the
//     endpoint change repeated at that size; the node proxy's config dump
//     (include_eds) in proactive and on-demand CDS; kube-proxy and the node pod
//     restarted on one node with every object present.
//   - what a connection costs (TestDataplane, only with SVCLB_PERF_DATA=1:
//     make perf DATA=1): the same two clients and backend through four paths,
//     the wire, kube-proxy, the node proxy then kube-proxy (Phase 1 off), the
//     node proxy to the endpoint (Phase 1 on); setup to first byte in an
//     open loop, new connections per second in a closed one, bulk
//     throughput, and the node proxy's CPU per connection and per GiB
//     (perf-client load, e2e/perf/internal/connload); around each open loop
//     the client netns's TCP counters (perf-client tcpstat,
//     e2e/perf/internal/tcpstat) and the node's CPU (nodestat.ReadMachine).
//
// Each writes a JSON file into the artifacts directory
// (e2e/perf/internal/result); e2e/perf/internal/report renders report.md and
// report.html from whichever exist, with the machine's load around each
// figure. Run it with `make perf` (e2e/perf/perf.mk, e2e/perf/run.sh); without
// SVCLB_PERF=1 every test skips, so `make test` runs only the unit parts
// (e2e/perf/internal/...). docs/perf.md has the figures and what bounds them.
package perf
