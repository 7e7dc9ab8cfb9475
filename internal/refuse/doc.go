// Package refuse refuses a meshed pod's connection to a Service port the agent knows it does
// not serve before the node proxy's listener accepts it, so the caller's connect(2) fails with
// ECONNREFUSED at the SYN as it does through kube-proxy (docs/architecture.md, "Refusing
// before accept").
//
// In the pod's network namespace, beside the capture table (internal/capture), a table
// `ip svclb_refuse` (testdata/table.golden) has an output chain ordered before the capture's
// marking. It first returns what the capture leaves to kube-proxy (the proxy's own mark,
// TCP/53), then answers a SYN with a TCP reset for two reasons:
//
//   - no-endpoints: the destination (VIP . port) is in the set `refused`, a counter each;
//   - port-not-declared: the VIP is in `vips` (the Services the agent serves) and VIP . port
//     is not in `declared` (their spec.ports[].port). Such a SYN is first recorded in
//     `undeclared`, a dynamic set with a counter per destination, bounded in size and idle
//     time; when it is full the SYN is still reset, only not counted.
//
// The agent keeps the sets (agent/refuser.go) around each push so that nothing the proxy
// serves is ever refused: a destination stops being refused before the push that serves it
// and starts after the push that stops serving it. The counters attribute each refusal to the
// Service port and, the table being per netns, to the pod.
//
// The table is IPv4 only, as the capture and the agent's Service index are: IPv6 is neither
// captured nor refused.
//
// Every function takes a *nftables.Conn already bound to the pod's netns (Open gives one
// through the netns's fd, never by switching a thread).
//
// Files: refuse.go (the table, its updates and counters), open.go (a connection into a netns
// by path).
package refuse
