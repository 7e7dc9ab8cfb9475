package agent_test

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestRunConnectionsBySource runs the whole agent against a real kube-apiserver: connected
// entries on the connection log count under the pod of their source address, found in the
// agent's informer of its node's pods and named by its Deployment (the ReplicaSet owner
// without its pod-template-hash); an address no pod has counts as unknown.
func TestRunConnectionsBySource(t *testing.T) {
	rc, c, ctx, must := startAPIServer(t)
	must(c.CoreV1().ConfigMaps(contract.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap},
		Data: map[string]string{"phase1": "true", "phase2": "true"}}, metav1.CreateOptions{}))
	must(c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}))
	svc := createService(ctx, t, c, "web", 80)
	setSlice(ctx, t, c, "web", 8080, ready("10.244.1.5"))
	const podIP = "10.244.0.7"
	pod, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client-5d8f7c-x2k4q",
			Labels: map[string]string{contract.CapturedLabel: "true", "pod-template-hash": "5d8f7c"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "client-5d8f7c",
				UID: "0b8e4c1e-0000-4000-8000-000000000001", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "client"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP, pod.Status.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	must(c.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}))

	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "xds.sock")
	httpAddr, _ := startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: sock, NetnsDir: dir,
		Phase1: true, Phase2: true, Debounce: 10 * time.Millisecond})
	cl, _, conn := dialAgent(ctx, t, sock)
	adstest.Eventually(t, "the first CDS response", func() bool { return len(cl.Names(resourcev3.ClusterType)) > 0 })

	als, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := true
	send := func(src string, n int) {
		t.Helper()
		m := &accesslogv3.StreamAccessLogsMessage{LogEntries: &accesslogv3.StreamAccessLogsMessage_TcpLogs{
			TcpLogs: &accesslogv3.StreamAccessLogsMessage_TCPAccessLogEntries{}}}
		for range n {
			m.GetTcpLogs().LogEntry = append(m.GetTcpLogs().LogEntry, &accesslogdatav3.TCPAccessLogEntry{CommonProperties: &accesslogdatav3.AccessLogCommon{
				DownstreamRemoteAddress: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: src, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 41000}}}},
				DownstreamLocalAddress: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: svc.Spec.ClusterIP, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}}},
				UpstreamCluster: "svc:" + svc.Spec.ClusterIP + ":80",
				AccessLogType:   accesslogdatav3.AccessLogType_TcpUpstreamConnected,
			}})
		}
		if first {
			m.Identifier = &accesslogv3.StreamAccessLogsMessage_Identifier{LogName: contract.ConnectionLogName}
			first = false
		}
		if err := als.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	series := func(srcNS, workload string) string {
		return fmt.Sprintf(`%s{namespace="default",port="80",service="web",source_namespace=%q,source_workload=%q}`,
			contract.MetricSvcConnections, srcNS, workload)
	}
	clientSeries, unknownSeries := series("default", "client"), series("", contract.SourceUnknown)
	// The informer has the pod once one entry counts under its workload.
	adstest.Eventually(t, "a connection counted under the pod's Deployment", func() bool {
		send(podIP, 1)
		return metricValue(t, httpAddr, clientSeries) > 0
	})
	before := metricValue(t, httpAddr, clientSeries)
	send(podIP, 5)
	send("10.244.0.99", 2)
	adstest.Eventually(t, "the counts", func() bool {
		return metricValue(t, httpAddr, clientSeries) == before+5 && metricValue(t, httpAddr, unknownSeries) == 2
	})
}

// metricValue reads one series' value from the agent's /metrics; -1 if it is not there.
func metricValue(t *testing.T, addr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}
