package nodeproxy

import (
	"net/netip"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// withAccessLog applies mut to cap_svc's refusal access log (Phase 2) and its tcp_grpc config.
func withAccessLog(mut func(*accesslogv3.AccessLog, *grpcalsv3.TcpGrpcAccessLogConfig)) listenerMut {
	return withSvcTCPProxy(func(tp *tcpproxyv3.TcpProxy) { mutAccessLog(tp.AccessLog[0], mut) })
}

// refusalLogOnly is withAccessLog on cap_svc without its connection log and
// flush_access_log_on_connected: one entry per connection, as it ends.
func refusalLogOnly(mut func(*accesslogv3.AccessLog, *grpcalsv3.TcpGrpcAccessLogConfig)) listenerMut {
	return withSvcTCPProxy(func(tp *tcpproxyv3.TcpProxy) {
		tp.AccessLog, tp.AccessLogOptions = tp.AccessLog[:1], nil
		mutAccessLog(tp.AccessLog[0], mut)
	})
}

// zeroBuffers sends every entry of cap_svc's access logs at once.
func zeroBuffers() listenerMut {
	return withSvcTCPProxy(func(tp *tcpproxyv3.TcpProxy) {
		for _, al := range tp.AccessLog {
			mutAccessLog(al, func(_ *accesslogv3.AccessLog, cfg *grpcalsv3.TcpGrpcAccessLogConfig) {
				cfg.CommonConfig.BufferSizeBytes = wrapperspb.UInt32(0)
			})
		}
	})
}

func mutAccessLog(al *accesslogv3.AccessLog, mut func(*accesslogv3.AccessLog, *grpcalsv3.TcpGrpcAccessLogConfig)) {
	var cfg grpcalsv3.TcpGrpcAccessLogConfig
	if err := al.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
		panic(err)
	}
	mut(al, &cfg)
	al.ConfigType = &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(&cfg)}
}

// alsResources are the agent's Phase 2 listener of a pod on lis changed by
// mut, and its svc: cluster with the endpoints eps.
func alsResources(lis netip.AddrPort, mut listenerMut, eps ...netip.AddrPort) map[resourcev3.Type][]types.Resource {
	name := clusterOf(lis)
	return map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {captureListener(translate.CapturedPod{Namespace: "ns", Name: "pod"}, loopbackOptions(true), onLoopback(lis), mut)},
		resourcev3.ClusterType:  {translate.PassthroughOriginalDst(), translate.Cluster(name, contract.StatName("ns", "web", 80), false)},
		resourcev3.EndpointType: {loadAssignment(name, eps)},
	}
}

// alsAgent serves alsResources on a free loopback port to a running proxy.
func alsAgent(t *testing.T, mut listenerMut, eps ...netip.AddrPort) (*agent, netip.AddrPort) {
	t.Helper()
	a := startAgent(t)
	lis := freePort(t)
	a.set(t, "1", alsResources(lis, mut, eps...))
	p := startProxy(t, a.sock)
	adstest.Eventually(t, "listener bound", func() bool { return len(activeListeners(p)) == 1 && p.ready.Load() })
	return a, lis
}

func (a *agent) ackCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acks
}

func (a *agent) messages() []*alsv3.StreamAccessLogsMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*alsv3.StreamAccessLogsMessage(nil), a.logs...)
}

// TestALSBatchesEntries: entries are buffered and sent together once their
// size reaches buffer_size_bytes, not one message per connection; with a
// buffer_flush_interval of an hour nothing is sent before (Envoy's
// GrpcAccessLogger::log flushes at the size, its flush timer at the interval).
func TestALSBatchesEntries(t *testing.T) {
	// One UH entry's size, give or take the varint lengths of port and time:
	// two entries stay below the buffer, the third fills it.
	one := proto.Size(tcpEntry(logEntry{local: netip.MustParseAddrPort("127.0.0.1:40000"),
		remote: netip.MustParseAddrPort("127.0.0.1:50000"), flags: []string{"UH"}}, accesslogdatav3.AccessLogType_TcpConnectionEnd, nil))
	a, lis := alsAgent(t, withAccessLog(func(_ *accesslogv3.AccessLog, cfg *grpcalsv3.TcpGrpcAccessLogConfig) {
		cfg.CommonConfig.BufferFlushInterval = durationpb.New(time.Hour)
		cfg.CommonConfig.BufferSizeBytes = wrapperspb.UInt32(uint32(one * 5 / 2))
	}))
	for range 2 {
		if got := greet(t, lis); got != "" {
			t.Fatalf("empty cluster answered %q", got)
		}
	}
	gomega.NewWithT(t).Consistently(func() int { return len(a.messages()) }).WithTimeout(500*time.Millisecond).
		WithPolling(10*time.Millisecond).Should(gomega.Equal(0), "an access log message before the buffer filled")
	greet(t, lis)
	adstest.Eventually(t, "the batch", func() bool { return len(a.messages()) > 0 })
	ms := a.messages()
	if len(ms) != 1 || len(ms[0].GetTcpLogs().GetLogEntry()) != 3 {
		t.Fatalf("want one message with the three entries, got %d messages: %v", len(ms), ms)
	}
	if id := ms[0].GetIdentifier(); id.GetLogName() != contract.RefusalLogName || id.GetNode().GetId() != testNode {
		t.Fatalf("first message of the stream without the identifier: %v", id)
	}
}

// TestALSUpstreamCluster: an entry names the upstream cluster and host only
// when a host was selected (served or UF), not for UH or NC
// (grpc_access_log_utils.cc extractCommonAccessLogProperties reads them from
// the stream info's upstream host).
func TestALSUpstreamCluster(t *testing.T) {
	live, dead := echoServer(t, "e"), deadAddr(t)
	// No filter and a zero buffer: every connection is logged, each at once.
	logAll := refusalLogOnly(func(al *accesslogv3.AccessLog, cfg *grpcalsv3.TcpGrpcAccessLogConfig) {
		al.Filter = nil
		cfg.CommonConfig.BufferSizeBytes = wrapperspb.UInt32(0)
	})
	a, lis := alsAgent(t, logAll, live)
	name := clusterOf(lis)
	// entry waits for the first entry with flag ("-" = none).
	entry := func(flag string) *accesslogdatav3.AccessLogCommon {
		t.Helper()
		var found *accesslogdatav3.AccessLogCommon
		adstest.Eventually(t, flag+" entry", func() bool {
			greet(t, lis)
			for _, m := range a.messages() {
				for _, e := range m.GetTcpLogs().GetLogEntry() {
					cp, f, got := e.GetCommonProperties(), e.GetCommonProperties().GetResponseFlags(), "-"
					// A connection whose first attempt failed (UF) and whose
					// retry found the cluster emptied meanwhile carries both
					// flags and its first attempt's host, as Envoy's does:
					// not the entry either step looks for.
					switch {
					case f.GetNoHealthyUpstream() && f.GetUpstreamConnectionFailure():
						got = "UF,UH"
					case f.GetNoHealthyUpstream():
						got = "UH"
					case f.GetUpstreamConnectionFailure():
						got = "UF"
					}
					if got == flag {
						found = cp
						return true
					}
				}
			}
			return false
		})
		return found
	}
	upstream := func(cp *accesslogdatav3.AccessLogCommon) string {
		sa := cp.GetUpstreamRemoteAddress().GetSocketAddress()
		if sa == nil {
			return ""
		}
		return netip.AddrPortFrom(netip.MustParseAddr(sa.GetAddress()), uint16(sa.GetPortValue())).String()
	}

	if cp := entry("-"); cp.GetUpstreamCluster() != name || upstream(cp) != live.String() {
		t.Fatalf("served: upstream_cluster %q, upstream_remote_address %q", cp.GetUpstreamCluster(), upstream(cp))
	}
	a.set(t, "2", alsResources(lis, logAll, dead))
	if cp := entry("UF"); cp.GetUpstreamCluster() != name || upstream(cp) != dead.String() {
		t.Fatalf("UF: upstream_cluster %q, upstream_remote_address %q", cp.GetUpstreamCluster(), upstream(cp))
	}
	a.set(t, "3", alsResources(lis, logAll))
	if cp := entry("UH"); cp.GetUpstreamCluster() != "" || cp.GetUpstreamRemoteAddress() != nil {
		t.Fatalf("UH: upstream_cluster %q, upstream_remote_address %v, want none", cp.GetUpstreamCluster(), cp.GetUpstreamRemoteAddress())
	}
}

// TestALSAfterAgentRestart: the first batch after the agent restarted
// reaches the new agent. The old stream is dropped when the agent closes it
// (Envoy's LocalStream::onRemoteClose), not discovered dead by the next
// send, which would lose that batch.
func TestALSAfterAgentRestart(t *testing.T) {
	live := echoServer(t, "e")
	logAll := refusalLogOnly(func(al *accesslogv3.AccessLog, cfg *grpcalsv3.TcpGrpcAccessLogConfig) {
		al.Filter = nil
		cfg.CommonConfig.BufferSizeBytes = wrapperspb.UInt32(0)
	})
	a, lis := alsAgent(t, logAll, live)
	greet(t, lis)
	adstest.Eventually(t, "the entry before the restart", func() bool { return len(a.messages()) == 1 })
	acks := a.ackCount()
	a.srv.Stop()
	a.start(t)
	// The proxy's ADS stream saw the restart when it has come back and
	// ACKed again; its access log stream ended in the same transport close.
	adstest.Eventually(t, "the proxy back on the new agent", func() bool { return a.ackCount() > acks })
	// The proxy kept its config while the agent was away; one connection,
	// one entry, one message: the one that used to be lost.
	if got := greet(t, lis); got == "" {
		t.Fatal("no reply while the agent restarted")
	}
	adstest.Eventually(t, "the entry after the restart", func() bool { return len(a.messages()) == 2 })
	if id := a.messages()[1].GetIdentifier(); id.GetLogName() != contract.RefusalLogName {
		t.Fatalf("first message of the new stream without the identifier: %v", id)
	}
}
