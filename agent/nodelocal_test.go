package agent

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// refusedRanges are the prefixes a listener sends to cap_refused.
func refusedRanges(ranges map[netip.Prefix]string) []netip.Prefix {
	var out []netip.Prefix
	for p, c := range ranges {
		if c == contract.ChainRefused {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// TestNodeAddressesRefused: every capture listener refuses the node-local ranges and each IPv4
// address of the agent's Node, in every phase; a change of the Node's addresses rebuilds the
// listeners, /status names them, and a Node of another name or without addresses changes nothing.
func TestNodeAddressesRefused(t *testing.T) {
	f := newFixture(t)
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	_ = f.services.Add(svcObj("web", "10.96.0.10"))
	node := func(name string, addrs ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
		return n
	}
	set := func(o any) {
		if addrs, ok := nodeAddrsOf("node-a", o); ok {
			f.s.setNodeAddrs(addrs)
		}
	}
	const lis = "capture~ns~client"
	check := func(what string, addrs ...string) {
		t.Helper()
		var want []netip.Addr
		for _, a := range addrs {
			want = append(want, netip.MustParseAddr(a))
		}
		ranges, err := translate.ListenerRanges(f.s.set.Listeners[lis])
		if err != nil {
			t.Fatal(err)
		}
		if got, want := refusedRanges(ranges), sortedPrefixes(translate.NodeLocalPrefixes(want)); !slices.Equal(got, want) {
			t.Errorf("%s: refused %v, want %v", what, got, want)
		}
		st := f.s.status.Load()
		if got := st.NodeAddresses; !slices.Equal(got, addrs) && (len(got) != 0 || len(addrs) != 0) {
			t.Errorf("%s: /status nodeAddresses %v, want %v", what, got, addrs)
		}
	}
	f.sync(t)
	check("no Node yet")
	set(node("node-a", "172.18.0.3", "fc00::3", "172.18.0.3", "192.168.9.1"))
	f.sync(t)
	check("with its Node", "172.18.0.3", "192.168.9.1")
	f.s.setPhases(false, false)
	f.sync(t)
	check("phases off", "172.18.0.3", "192.168.9.1")
	set(node("node-b", "172.18.0.4"))
	f.sync(t)
	check("another Node", "172.18.0.3", "192.168.9.1")
	set(node("node-a", "172.18.0.5"))
	f.sync(t)
	check("moved", "172.18.0.5")
	if u := f.pub.last(); u.Listeners[lis] == nil {
		t.Errorf("a change of the node's addresses did not republish %s: %+v", lis, u)
	}
}

func sortedPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}
