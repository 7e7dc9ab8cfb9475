// Node: what the agent's Node says (its zone and its own addresses).

package agent

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/internal/translate"
)

// nodeOf is the Node o names with its zone; o not that Node: the name alone.
func nodeOf(name string, o any) translate.Node {
	n := translate.Node{Name: name}
	if node, ok := o.(*corev1.Node); ok && node.Name == name {
		n.Zone = node.Labels[corev1.LabelTopologyZone]
	}
	return n
}

// nodeAddrsOf are the IPv4 addresses of the Node o names (status.addresses, every type that
// holds an IP: InternalIP, ExternalIP), sorted and without duplicates; ok is false when o is
// not that Node.
func nodeAddrsOf(name string, o any) (addrs []netip.Addr, ok bool) {
	node, ok := o.(*corev1.Node)
	if !ok || node.Name != name {
		return nil, false
	}
	for _, a := range node.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Unmap().Is4() {
			addrs = append(addrs, ip.Unmap())
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs), true
}
