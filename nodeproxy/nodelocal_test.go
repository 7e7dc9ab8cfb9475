package nodeproxy

import (
	"net/netip"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/internal/translate/translatetest"
	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// withRefusedAccessLog applies mut to cap_refused's access log config.
func withRefusedAccessLog(mut func(*grpcalsv3.CommonGrpcAccessLogConfig)) listenerMut {
	return func(l *listenerv3.Listener) {
		f := chain(l, contract.ChainRefused).Filters[0]
		var tp tcpproxyv3.TcpProxy
		if err := f.GetTypedConfig().UnmarshalTo(&tp); err != nil {
			panic(err)
		}
		var cfg grpcalsv3.TcpGrpcAccessLogConfig
		if err := tp.AccessLog[0].GetTypedConfig().UnmarshalTo(&cfg); err != nil {
			panic(err)
		}
		mut(cfg.CommonConfig)
		tp.AccessLog[0].ConfigType = &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(&cfg)}
		f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(&tp)}
	}
}

// TestNodeLocalIsAccepted: the proxy reads cap_refused as the agent means it: the node-local
// ranges and the node's addresses select it in every phase, its tcp_proxy goes to the blackhole
// cluster, a STATIC cluster with no endpoint, and its access log reports every connection with
// the pod's tag.
func TestNodeLocalIsAccepted(t *testing.T) {
	pod := translate.CapturedPod{Namespace: "ns", Name: "p", NetnsPath: "/var/run/netns/cni-x"}
	for _, phase1 := range []bool{true, false} {
		opts := translatetest.Options(phase1, true)
		opts.NodeAddrs = []netip.Addr{translatetest.NodeIP}
		l, err := xdsconfig.ParseListener(captureListener(pod, opts))
		if err != nil {
			t.Fatal(err)
		}
		for _, dst := range []string{"127.0.0.1", "0.0.0.0", "169.254.169.254", "224.0.0.1", "255.255.255.255", translatetest.NodeIP.String()} {
			if c := selectChain(l, netip.MustParseAddr(dst)); c == nil || c.Name != contract.ChainRefused {
				t.Errorf("phase1=%v: %s → %v, want %s", phase1, dst, c, contract.ChainRefused)
			}
		}
		c := l.Chains[contract.ChainRefused]
		if c.TCP.Cluster != contract.BlackholeCluster || len(c.TCP.AccessLogs) != 1 {
			t.Fatalf("cap_refused tcp_proxy %+v", c.TCP)
		}
		al := c.TCP.AccessLogs[0]
		if al.LogName != contract.NodeLocalLogName || al.Tags[contract.TagPod] != "ns/p" || !al.Wants("UH") || !al.Wants("") {
			t.Errorf("cap_refused access log %+v", al)
		}
	}
	bh, err := xdsconfig.ParseCluster(translate.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	if bh.Type != xdsconfig.Static {
		t.Errorf("blackhole type %v", bh.Type)
	}
}

// TestNodeLocalRefused: a connection cap_refused takes is closed at once, never dialled, and
// counted as Envoy 1.39 counts it: in tcp.cap_refused.downstream_cx_total only, the blackhole's
// upstream_cx_none_healthy staying 0 (proxy.go connect); its access log entry (UH) reaches the
// agent on the node-local log with the pod's tag. The listener has no Service range, so its own loopback
// address is a node-local destination.
func TestNodeLocalRefused(t *testing.T) {
	a := startAgent(t)
	lis := freePort(t)
	pod := translate.CapturedPod{Namespace: "ns", Name: "hostile"}
	a.set(t, "1", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {captureListener(pod, translate.ListenerOptions{}, onLoopback(lis))},
		resourcev3.ClusterType:  {translate.PassthroughOriginalDst(), translate.Blackhole()},
	})
	p := startProxy(t, a.sock)
	adstest.Eventually(t, "listener bound", func() bool { return len(activeListeners(p)) == 1 && p.ready.Load() })
	for range 3 {
		if got := greet(t, lis); got != "" {
			t.Fatalf("a node-local destination reached %q", got)
		}
	}
	for stat, want := range map[string]int64{
		"tcp." + contract.ChainRefused + ".downstream_cx_total":            3,
		clusterStat(contract.BlackholeCluster, "upstream_cx_none_healthy"): 0,
		clusterStat(contract.BlackholeCluster, "upstream_cx_total"):        0,
		"tcp." + contract.ChainPassthrough + ".downstream_cx_total":        0,
	} {
		if got := p.stats.value(stat); got != want {
			t.Errorf("%s = %d, want %d", stat, got, want)
		}
	}
	adstest.Eventually(t, "three node-local entries", func() bool {
		n := 0
		for _, m := range a.messages() {
			for _, e := range m.GetTcpLogs().GetLogEntry() {
				cp := e.GetCommonProperties()
				if cp.GetCustomTags()[contract.TagPod] == "ns/hostile" && cp.GetResponseFlags().GetNoHealthyUpstream() &&
					cp.GetDownstreamLocalAddress().GetSocketAddress().GetPortValue() == uint32(lis.Port()) {
					n++
				}
			}
		}
		return n == 3
	})
	var names []string
	for _, m := range a.messages() {
		if id := m.GetIdentifier(); id != nil {
			names = append(names, id.GetLogName())
		}
	}
	if len(names) != 1 || names[0] != contract.NodeLocalLogName {
		t.Errorf("log identifiers %v, want one stream of %s", names, contract.NodeLocalLogName)
	}
}
