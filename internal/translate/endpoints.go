package translate

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Node is what the translation needs to know about the node the agent runs on.
type Node struct {
	Name string
	Zone string // topology.kubernetes.io/zone; empty: no topology preference applies
}

// Endpoint is one backend of a Service port as it lands in a ClusterLoadAssignment.
type Endpoint struct {
	Addr     netip.AddrPort
	Zone     string
	Priority uint32
	// Terminating marks a serving-but-terminating endpoint, used only when no ready one exists.
	Terminating bool
}

type candidate struct {
	addr     netip.AddrPort
	zone     string
	ready    bool // false: serving and terminating (the fallback set)
	hinted   bool
	forZones []string
}

// SelectEndpoints applies docs/design.md ("What a svc: cluster says") to the slices of one Service for one of its ports:
// ready endpoints first (this zone before other zones when topology applies), serving and
// terminating endpoints in the bands after them, everything else left out. Priorities are
// contiguous from 0 as Envoy requires. The result is sorted (priority, zone, address).
func SelectEndpoints(svc *corev1.Service, portName string, eps []*discoveryv1.EndpointSlice, node Node) []Endpoint {
	localOnly := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	var cands []candidate
	seen := map[netip.AddrPort]int{}
	for _, s := range eps {
		if s == nil || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue // IPv6 and FQDN slices: svc: clusters are IPv4 only
		}
		port, ok := slicePort(s, portName)
		if !ok {
			continue // the slice has no port of this name: named targetPort did not resolve here
		}
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			serving := ep.Conditions.Serving == nil || *ep.Conditions.Serving
			terminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
			if !ready && (!serving || !terminating) {
				continue
			}
			if localOnly && (ep.NodeName == nil || *ep.NodeName != node.Name) {
				continue
			}
			if len(ep.Addresses) == 0 {
				continue
			}
			// The addresses of one endpoint are fungible; consumers use the first (API doc).
			ip, err := netip.ParseAddr(ep.Addresses[0])
			if err != nil || !ip.Is4() {
				continue
			}
			c := candidate{addr: netip.AddrPortFrom(ip, port), ready: ready}
			if ep.Zone != nil {
				c.zone = *ep.Zone
			}
			if ep.Hints != nil && len(ep.Hints.ForZones) > 0 {
				c.hinted = true
				for _, z := range ep.Hints.ForZones {
					c.forZones = append(c.forZones, z.Name)
				}
			}
			if j, dup := seen[c.addr]; dup {
				// The same address in two slices (e.g. while the controller moves it): keep the
				// better condition so a ready copy is never demoted by a terminating one.
				if c.ready && !cands[j].ready {
					cands[j] = c
				}
				continue
			}
			seen[c.addr] = len(cands)
			cands = append(cands, c)
		}
	}

	preferClose := svc.Spec.TrafficDistribution != nil &&
		(*svc.Spec.TrafficDistribution == corev1.ServiceTrafficDistributionPreferClose ||
			*svc.Spec.TrafficDistribution == "PreferSameZone")
	isLocal := func(c candidate) bool {
		if c.hinted { // the slice's hints win over PreferClose
			return slices.Contains(c.forZones, node.Zone)
		}
		return preferClose && c.zone == node.Zone
	}
	// bands: ready-local, ready-other, terminating-local, terminating-other. Without topology
	// (no zone, no preference, or nothing local in that set) the local band stays empty.
	topology := func(ready bool) bool {
		if node.Zone == "" {
			return false
		}
		for _, c := range cands {
			if c.ready == ready && isLocal(c) {
				return true
			}
		}
		return false
	}
	topoReady, topoTerm := topology(true), topology(false)
	band := func(c candidate) int {
		b := 1
		if c.ready && topoReady && isLocal(c) || !c.ready && topoTerm && isLocal(c) {
			b = 0
		}
		if !c.ready {
			b += 2
		}
		return b
	}
	var used [4]bool
	for _, c := range cands {
		used[band(c)] = true
	}
	var prio [4]uint32
	next := uint32(0)
	for b := range used {
		if used[b] {
			prio[b] = next
			next++
		}
	}
	out := make([]Endpoint, 0, len(cands))
	for _, c := range cands {
		out = append(out, Endpoint{Addr: c.addr, Zone: c.zone, Priority: prio[band(c)], Terminating: !c.ready})
	}
	slices.SortFunc(out, func(a, b Endpoint) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Zone, b.Zone), a.Addr.Compare(b.Addr))
	})
	return out
}

// slicePort finds the TCP port of the slice named like the Service port. The EndpointSlice
// controller names slice ports after Service ports and resolves named targetPorts per pod, so
// this is where a named targetPort resolves.
func slicePort(s *discoveryv1.EndpointSlice, name string) (uint16, bool) {
	for _, p := range s.Ports {
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		if pn != name || p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
			continue
		}
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		return uint16(*p.Port), true
	}
	return 0, false
}
