// Package refuse is the prototype behind docs/peer.md, "Beyond kube-proxy":
// refusing a meshed pod's connection to a Service the agent knows to be empty
// before the node proxy's listener accepts it, so the caller's connect(2)
// fails with ECONNREFUSED as it does through kube-proxy.
//
// In the pod's network namespace, beside the capture table, a table holds a
// set of refused destinations (VIP . port) with a counter per element and an
// output rule, ordered before the capture's marking, that answers a SYN to
// one of them with a TCP reset. The agent would keep the set: add a Service
// port when its cluster empties (Phase 2's no-endpoints), delete it when an
// endpoint appears; the per-element counters attribute each refusal to the
// Service and, being per netns, to the pod. The package measures what that
// costs; it is not wired into the agent.
package refuse
