// Package svcindex answers, for a captured IPv4 TCP destination, what it is:
// a declared port of a Service (Known), the ClusterIP of a Service on a port
// it does not declare (PortNotDeclared), an address inside the Service range
// that no Service owns (NoService), or an address outside the range (External).
//
// The Service range is the union of the IPv4 CIDRs of networking.k8s.io/v1
// ServiceCIDR objects (or Options.RangeOverride, which replaces them), plus a
// /32 per IPv4 address of a ClusterSetIP multicluster.x-k8s.io ServiceImport
// when that CRD is served. The range is checked first: a Service whose
// ClusterIP lies outside it is External, because the node proxy passes such
// destinations through unchanged and never asks about them. With no
// ServiceCIDR and no override the range is unknown (Range reports
// known=false) and every destination is External.
//
// Rules the index follows, all from how kube-proxy treats the same objects:
//   - headless (clusterIP: None) and ExternalName Services are not indexed;
//   - IPv4 only: a dual-stack Service is indexed by its IPv4 ClusterIP, IPv6
//     destinations are External (IPv4-mapped IPv6 destinations are unmapped);
//   - only TCP ports count (a missing protocol means TCP, as the apiserver
//     defaults it); a TCP dial to a UDP- or SCTP-only port is PortNotDeclared;
//   - selectorless Services index like any other: their endpoints are the
//     agent's concern, not the index's.
//
// If two Services claim the same ClusterIP (the apiserver's allocator forbids
// it, but a delete and a create can race in a hand-fed index), the one whose
// namespace/name sorts first answers lookups, whatever the order of events;
// the other takes over when the first goes away or moves.
//
// Lookups take a read lock and two map/array probes: O(1), no allocations.
// Every change that can alter an answer bumps Version and closes the channel
// Changed returned, so the agent can wait for changes without polling.
package svcindex
