package translate_test

import (
	"slices"
	"testing"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	grpclogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
)

// cap_svc's tcp_proxy with Phase 2 on: the refusal log as it was, and the connection log,
// which takes the one entry written when the upstream connects.
func TestSvcChainAccessLogs(t *testing.T) {
	pod := translate.CapturedPod{Namespace: "ns", Name: "client", NetnsPath: "/var/run/netns/cni-1"}
	for _, phase2 := range []bool{true, false} {
		l := translate.CaptureListener(pod, listenerOpts(true, phase2))
		i := slices.IndexFunc(l.FilterChains, func(fc *listenerv3.FilterChain) bool { return fc.Name == contract.ChainSvc })
		if i < 0 {
			t.Fatalf("no chain %s", contract.ChainSvc)
		}
		var tp tcpproxyv3.TcpProxy
		if err := l.FilterChains[i].Filters[1].GetTypedConfig().UnmarshalTo(&tp); err != nil {
			t.Fatal(err)
		}
		if !phase2 {
			if len(tp.GetAccessLog()) != 0 || tp.GetAccessLogOptions() != nil {
				t.Errorf("phase2 off: access logs %v, options %v", tp.GetAccessLog(), tp.GetAccessLogOptions())
			}
			continue
		}
		if o := tp.GetAccessLogOptions(); !o.GetFlushAccessLogOnConnected() || o.GetAccessLogFlushInterval() != nil || o.GetFlushAccessLogOnStart() {
			t.Errorf("access_log_options %v, want {flush_access_log_on_connected: true}", o)
		}
		if tp.GetFlushAccessLogOnConnected() || tp.GetAccessLogFlushInterval() != nil { //nolint:staticcheck // the deprecated fields must stay unset
			t.Error("the deprecated top-level access log fields are set")
		}
		logs := tp.GetAccessLog()
		if len(logs) != 2 {
			t.Fatalf("access logs %v, want the refusal and the connection log", logs)
		}
		names := make([]string, 0, 2)
		for _, al := range logs {
			var g grpclogv3.TcpGrpcAccessLogConfig
			if err := al.GetTypedConfig().UnmarshalTo(&g); err != nil {
				t.Fatal(err)
			}
			if g.GetCommonConfig().GetGrpcService().GetEnvoyGrpc().GetClusterName() != contract.XDSCluster {
				t.Errorf("access log %s: cluster %v", g.GetCommonConfig().GetLogName(), g.GetCommonConfig().GetGrpcService())
			}
			names = append(names, g.GetCommonConfig().GetLogName())
		}
		if !slices.Equal(names, []string{contract.RefusalLogName, contract.ConnectionLogName}) {
			t.Errorf("log names %v", names)
		}
		if f := logs[0].GetFilter().GetResponseFlagFilter().GetFlags(); !slices.Equal(f, []string{"UH", "NC"}) {
			t.Errorf("refusal log filter %v, want response flags UH, NC", logs[0].GetFilter())
		}
		lt := logs[1].GetFilter().GetLogTypeFilter()
		if !slices.Equal(lt.GetTypes(), []accesslogdatav3.AccessLogType{accesslogdatav3.AccessLogType_TcpUpstreamConnected}) || lt.GetExclude() {
			t.Errorf("connection log filter %v, want log_type_filter {types: [TcpUpstreamConnected]}", logs[1].GetFilter())
		}
	}
}
