package translate_test

import (
	"net/netip"
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	grpclogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// chainFor is the chain the listener's destination trie gives dst: the longest range holding
// it (Envoy's trie_matcher), else the default chain.
func chainFor(t *testing.T, l *listenerv3.Listener, dst netip.Addr) string {
	t.Helper()
	ranges, err := translate.MatcherRanges(l.GetFilterChainMatcher())
	if err != nil {
		t.Fatal(err)
	}
	best, chain := -1, l.GetDefaultFilterChain().GetName()
	for p, c := range ranges {
		if p.Contains(dst) && p.Bits() > best {
			best, chain = p.Bits(), c
		}
	}
	return chain
}

// TestCaptureListenerRefusesNodeLocal: in every phase, range known or not, the node's loopback,
// "this network", link-local, multicast and reserved ranges and each of the node's own addresses
// go to cap_refused, whose tcp_proxy goes to the blackhole cluster and reports each connection
// to the agent with the listener's pod; every other destination keeps its chain.
func TestCaptureListenerRefusesNodeLocal(t *testing.T) {
	pod := translate.CapturedPod{Namespace: "ns", Name: "client", NetnsPath: "/var/run/netns/cni-1"}
	nodeIP, other := netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("172.18.0.4")
	// A node address inside the Service range: the /32 wins over the /16.
	inRange := netip.MustParseAddr("10.96.7.7")
	for name, o := range map[string]translate.ListenerOptions{
		"phase1+2":      listenerOpts(true, true),
		"phase1 off":    listenerOpts(false, false),
		"range unknown": {Phase1: true, Phase2: true},
		"on-demand":     onDemand(listenerOpts(true, true)),
	} {
		t.Run(name, func(t *testing.T) {
			o.NodeAddrs = []netip.Addr{nodeIP, nodeIP, inRange, netip.MustParseAddr("fd00::1")}
			l := translate.CaptureListener(pod, o)
			if err := translate.Validate(l); err != nil {
				t.Fatal(err)
			}
			for _, dst := range []string{"127.0.0.1", "127.255.0.9", "0.0.0.0", "169.254.169.254", "224.0.0.251", "239.1.1.1",
				"240.0.0.1", "255.255.255.255", "172.18.0.3", "10.96.7.7"} {
				if got := chainFor(t, l, netip.MustParseAddr(dst)); got != contract.ChainRefused {
					t.Errorf("%s goes to %q, want %s", dst, got, contract.ChainRefused)
				}
			}
			for _, dst := range []netip.Addr{other, netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("1.1.1.1")} {
				if got := chainFor(t, l, dst); got != contract.ChainPassthrough {
					t.Errorf("%s goes to %q, want the passthrough", dst, got)
				}
			}
			if o.RangeKnown {
				want := contract.ChainPassthroughSvc
				if o.Phase1 {
					want = contract.ChainSvc
				}
				if got := chainFor(t, l, netip.MustParseAddr("10.96.0.10")); got != want {
					t.Errorf("a Service VIP goes to %q, want %q", got, want)
				}
			}
			i := slices.IndexFunc(l.FilterChains, func(fc *listenerv3.FilterChain) bool { return fc.Name == contract.ChainRefused })
			if i < 0 {
				t.Fatalf("no chain %s", contract.ChainRefused)
			}
			var tp tcpproxyv3.TcpProxy
			if err := l.FilterChains[i].Filters[0].GetTypedConfig().UnmarshalTo(&tp); err != nil || len(l.FilterChains[i].Filters) != 1 {
				t.Fatalf("cap_refused filters %v: %v", l.FilterChains[i].Filters, err)
			}
			if tp.GetCluster() != contract.BlackholeCluster || tp.GetStatPrefix() != contract.ChainRefused || len(tp.GetAccessLog()) != 1 {
				t.Fatalf("cap_refused tcp_proxy %v", &tp)
			}
			al := tp.GetAccessLog()[0]
			var g grpclogv3.TcpGrpcAccessLogConfig
			if err := al.GetTypedConfig().UnmarshalTo(&g); err != nil || al.GetFilter() != nil {
				t.Fatalf("access log %v: %v", al, err)
			}
			cc := g.GetCommonConfig()
			tags := cc.GetCustomTags()
			if cc.GetLogName() != contract.NodeLocalLogName || cc.GetGrpcService().GetEnvoyGrpc().GetClusterName() != contract.XDSCluster ||
				len(tags) != 1 || tags[0].GetTag() != contract.TagPod || tags[0].GetLiteral().GetValue() != "ns/client" {
				t.Errorf("access log config %v", cc)
			}
		})
	}
	got := translate.NodeLocalPrefixes([]netip.Addr{other, nodeIP, other})
	want := append(contract.NodeLocalRanges(), netip.PrefixFrom(nodeIP, 32), netip.PrefixFrom(other, 32))
	if !slices.Equal(got, want) {
		t.Errorf("NodeLocalPrefixes = %v, want %v", got, want)
	}
	bh := translate.Blackhole()
	if err := translate.Validate(bh); err != nil {
		t.Fatal(err)
	}
	if bh.GetName() != contract.BlackholeCluster || bh.GetType().String() != "STATIC" || len(bh.GetLoadAssignment().GetEndpoints()) != 0 {
		t.Errorf("blackhole cluster %v", bh)
	}
}
