package agent

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/aether-mesh/svclb/internal/testenv"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// startAPIServer starts a kube-apiserver with namespace svclb-system; must fails the test on
// an error.
func startAPIServer(t *testing.T) (*rest.Config, kubernetes.Interface, context.Context, func(any, error)) {
	t.Helper()
	rc := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	c := kubernetes.NewForConfigOrDie(rc)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: contract.Namespace}}, metav1.CreateOptions{}))
	return rc, c, ctx, must
}

// TestRunAgainstAPIServer runs the whole agent against a real kube-apiserver: the first
// snapshot carries the Service's cluster, and a Phase 1 flip in the ConfigMap withdraws it
// on the running agent.
func TestRunAgainstAPIServer(t *testing.T) {
	rc, c, ctx, must := startAPIServer(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	must(c.CoreV1().ConfigMaps(contract.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap},
		Data: map[string]string{"phase1": "true", "phase2": "true"}}, metav1.CreateOptions{}))
	must(c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{zoneLabel: "zone-a"}}}, metav1.CreateOptions{}))
	svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	es := sliceObj("web", "web-1", "10.244.1.5", "10.244.2.5")
	es.Namespace = "default"
	must(c.DiscoveryV1().EndpointSlices("default").Create(ctx, es, metav1.CreateOptions{}))
	want := "svc:" + svc.Spec.ClusterIP + ":80"

	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "xds.sock")
	done := make(chan error, 1)
	logs := &lockedBuffer{}
	go func() {
		done <- Run(ctx, Config{NodeName: "node-a", RestConfig: rc, XDSSocket: sock, HTTPAddr: "127.0.0.1:0",
			NetnsDir: dir, Phase1: false, Debounce: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	}()
	eventually(t, "the xDS socket", func() bool { _, err := os.Stat(sock); return err == nil })
	cl := dialCDS(t, ctx, sock)
	cl.send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType})
	// The ConfigMap (phase1 true) overrides the Config default (false) before the first push.
	cl.pump("the first CDS response", 10*time.Second, func() bool { return len(cl.have) > 0 })
	if !cl.have[want] || !cl.have["passthrough_original_dst"] {
		t.Fatalf("first snapshot clusters %v, want %s and passthrough_original_dst", keys(cl.have), want)
	}
	cm, err := c.CoreV1().ConfigMaps(contract.Namespace).Get(ctx, contract.AgentConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["phase1"] = "false"
	if cm, err = c.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.pump(want+" withdrawn (phase1 off)", 10*time.Second, func() bool { return !cl.have[want] })
	// Phase 1 on again: the cluster comes back on the same running agent.
	cm.Data["phase1"] = "true"
	must(c.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}))
	cl.pump(want+" back (phase1 on)", 10*time.Second, func() bool { return cl.have[want] })
	// EDS: the slice's two ready endpoints, this node's zone unknown to the slice: one band.
	cl.send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{want}})
	cl.pump("the load assignment", 10*time.Second, func() bool { return cl.loads[want] != nil })
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := cl.loads[want].UnmarshalTo(cla); err != nil {
		t.Fatal(err)
	}
	if len(cla.Endpoints) != 1 || len(cla.Endpoints[0].LbEndpoints) != 2 {
		t.Fatalf("load assignment %v", cla)
	}
	// Refusals are classified by the real index: an undeclared port of the Service's VIP.
	als, err := accesslogv3.NewAccessLogServiceClient(cl.conn).StreamAccessLogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = als.Send(&accesslogv3.StreamAccessLogsMessage{LogEntries: &accesslogv3.StreamAccessLogsMessage_TcpLogs{
		TcpLogs: &accesslogv3.StreamAccessLogsMessage_TCPAccessLogEntries{LogEntry: []*accesslogdatav3.TCPAccessLogEntry{{
			CommonProperties: &accesslogdatav3.AccessLogCommon{
				DownstreamLocalAddress: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: svc.Spec.ClusterIP, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 81}}}},
				ResponseFlags: &accesslogdatav3.ResponseFlags{NoClusterFound: true},
			}}}}}})
	if _, err := als.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("agent: %v", err)
	}
	if l := logs.String(); !strings.Contains(l, `msg="connection refused" reason=port-not-declared namespace=default service=web`) {
		t.Errorf("no refusal log line naming the Service:\n%s", l)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunOnDemand runs the whole agent in on-demand mode against a real kube-apiserver: the
// ConfigMap's cds (over the --cds default) shapes the first snapshot, a named request publishes
// one cluster, cds flips the running agent to proactive and back, and a restarted agent serves
// the demanded cluster in its first snapshot.
func TestRunOnDemand(t *testing.T) {
	rc, c, ctx, must := startAPIServer(t)
	cm, err := c.CoreV1().ConfigMaps(contract.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap},
		Data: map[string]string{"phase1": "true", "cds": "on-demand"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := map[string]string{}
	for _, n := range []string{"web", "other"} {
		svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		name[n] = "svc:" + svc.Spec.ClusterIP + ":80"
	}
	dir := t.TempDir()
	sock, file := filepath.Join(dir, "run", "xds.sock"), filepath.Join(dir, "lib", "demand.json")
	start := func() (context.CancelFunc, chan error, *cdsClient) {
		runCtx, stop := context.WithCancel(ctx)
		_ = os.Remove(sock)
		done := make(chan error, 1)
		go func() {
			done <- Run(runCtx, Config{NodeName: "node-a", RestConfig: rc, XDSSocket: sock, HTTPAddr: "127.0.0.1:0", NetnsDir: dir,
				Phase1: true, CDSMode: CDSProactive, DemandFile: file, Debounce: 10 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		}()
		eventually(t, "the xDS socket", func() bool { _, err := os.Stat(sock); return err == nil })
		cl := dialCDS(t, runCtx, sock)
		cl.send(&discoverygrpc.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "svclb-node~node-a"}, TypeUrl: resource.ClusterType})
		cl.pump("the first CDS response", 10*time.Second, func() bool { return cl.have["passthrough_original_dst"] })
		return stop, done, cl
	}
	stop, done, cl := start()
	if len(cl.have) != 1 {
		t.Fatalf("first snapshot, on demand (ConfigMap), nothing asked: %v", keys(cl.have))
	}
	cl.send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*", name["web"]}})
	cl.pump("web's cluster", 10*time.Second, func() bool { return cl.have[name["web"]] })

	cm.Data["cds"] = "proactive"
	if cm, err = c.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.pump("every cluster (proactive)", 10*time.Second, func() bool { return cl.have[name["other"]] })
	cm.Data["cds"] = "on-demand"
	must(c.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}))
	cl.pump("other's cluster withdrawn", 10*time.Second, func() bool { return !cl.have[name["other"]] })
	if !cl.have[name["web"]] {
		t.Fatal("the demanded cluster went with the switch back")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("agent: %v", err)
	}

	// Restarted: the demanded cluster is in the first response, before any request.
	stop, done, cl = start()
	defer func() { stop(); <-done }()
	if want := []string{"passthrough_original_dst", name["web"]}; !slices.Equal(keys(cl.have), sorted(want)) {
		t.Fatalf("first snapshot after restart %v, want %v", keys(cl.have), want)
	}
}
