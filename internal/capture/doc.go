// Package capture installs the mark-and-divert rules that send a meshed pod's
// outbound TCP to the node proxy's transparent listener on :18001, inside the
// pod's own network namespace, and tells when that listener exists.
//
// It is the one implementation behind both ways a pod is meshed: the init
// container cmd/svclb-capture (Install in its own namespace, then
// WaitForListener) and the chained CNI plugin cmd/svclb-cni
// (internal/cniplugin: Install, Check and Uninstall on the sandbox's netns
// path; the agent waits with ListeningIn). Tests check a namespace through
// fixtures/capture, which calls this package.
//
// The data path: an OUTPUT route chain marks the pod's TCP with Mark (not to
// loopback, link-local or multicast, not to port 53, and not to the node's own
// addresses, the set node_addrs of Config.NodeAddrs: TCP to those leaves the pod
// from its own address, so kube-proxy serves the node's NodePorts and the node's
// hostPorts and hostNetwork pods see the pod, as for an unmeshed one); a policy
// rule (fwmark Mark → table RouteTable) with a `local 0.0.0.0/0 dev lo` route
// loops marked packets back through lo; a PREROUTING chain on lo TPROXYs them to
// the listener (127.0.0.1:18001), which sees the original destination as its
// local address. An INPUT chain resets TCP to :18001 that arrives on any other
// interface, so no other host can reach the listener and have its connection
// passed through back into it.
// Everything is done with google/nftables and vishvananda/netlink (no shell).
//
// Files:
//
//	capture.go          Config, Install, Uninstall, the ruleset (testdata/ruleset.golden)
//	nodeaddrs.go        CheckNodeAddr, ParseNodeAddrs: the node's addresses left uncaptured
//	check.go            Check (what is missing) and Remains (what is left)
//	listening_netns.go  ListeningIn: a listener in another netns, by sock_diag
//	wait.go             Listening, WaitForListener: in the caller's own netns
package capture
