// Package refuse refuses a meshed pod's connection to a Service port the agent knows to be
// empty before the node proxy's listener accepts it, so the caller's connect(2) fails with
// ECONNREFUSED at the SYN as it does through kube-proxy (docs/architecture.md, "Refusing
// before accept").
//
// In the pod's network namespace, beside the capture table (internal/capture), a table
// `ip svclb_refuse` holds a set of refused destinations (VIP . port) with a counter per
// element, and an output chain ordered before the capture's marking whose one rule answers a
// SYN to one of them with a TCP reset. The agent keeps the set (agent/refuser.go): a Service
// port enters it after its cluster was published empty and leaves it before the endpoints
// that fill it are published; the per-element counters attribute each refusal to the Service
// port and, the table being per netns, to the pod.
//
// Every function takes a *nftables.Conn already bound to the pod's netns (Open gives one
// through the netns's fd, never by switching a thread).
//
// Files: refuse.go (the table, its updates and counters), open.go (a connection into a netns
// by path).
package refuse
