package agent_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/adsclient"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
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
	must(c.CoreV1().ConfigMaps(contract.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap},
		Data: map[string]string{"phase1": "true", "phase2": "true"}}, metav1.CreateOptions{}))
	must(c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}, metav1.CreateOptions{}))
	svc := createService(ctx, t, c, "web", 80)
	setSlice(ctx, t, c, "web", 8080, ready("10.244.1.5"), ready("10.244.2.5"))
	want := "svc:" + svc.Spec.ClusterIP + ":80"
	// The apiserver creates default/kubernetes itself; it must never get a cluster.
	var api *corev1.Service
	must(nil, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		api, err = c.CoreV1().Services(contract.APIServerNamespace).Get(ctx, contract.APIServerName, metav1.GetOptions{})
		return err == nil, nil
	}))
	apiCluster := "svc:" + api.Spec.ClusterIP + ":443"

	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "xds.sock")
	logs := &lockedBuffer{}
	_, stop := startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: sock,
		NetnsDir: dir, Phase1: false, Debounce: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	cl, _, conn := dialAgent(ctx, t, sock)
	has := func(name string) bool { return cl.Has(resourcev3.ClusterType, name) }
	// The ConfigMap (phase1 true) overrides the Config default (false) before the first push.
	adstest.Eventually(t, "the first CDS response", func() bool { return len(cl.Names(resourcev3.ClusterType)) > 0 })
	if !has(want) || !has(contract.PassthroughCluster) || has(apiCluster) {
		t.Fatalf("first snapshot clusters %v, want %s and %s, not %s", cl.Names(resourcev3.ClusterType), want, contract.PassthroughCluster, apiCluster)
	}
	cm, err := c.CoreV1().ConfigMaps(contract.Namespace).Get(ctx, contract.AgentConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["phase1"] = "false"
	if cm, err = c.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	adstest.Eventually(t, want+" withdrawn (phase1 off)", func() bool { return !has(want) })
	// Phase 1 on again: the cluster comes back on the same running agent.
	cm.Data["phase1"] = "true"
	must(c.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}))
	adstest.Eventually(t, want+" back (phase1 on)", func() bool { return has(want) })
	// EDS (the client asks for every EDS cluster it holds): the slice's two ready endpoints,
	// this node's zone unknown to the slice: one band.
	adstest.Eventually(t, "the load assignment", func() bool { return cl.Load(want) != nil })
	if cla := cl.Load(want); len(cla.Endpoints) != 1 || len(cla.Endpoints[0].LbEndpoints) != 2 {
		t.Fatalf("load assignment %v", cla)
	}
	// Refusals are classified by the real index: an undeclared port of the Service's VIP.
	als, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(ctx)
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
	stop()
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
		name[n] = "svc:" + createService(ctx, t, c, n, 80).Spec.ClusterIP + ":80"
	}
	dir := t.TempDir()
	sock, file := filepath.Join(dir, "run", "xds.sock"), filepath.Join(dir, "lib", "demand.json")
	// start runs an agent and a client until stop, and waits for the client's first clusters.
	start := func() (stop func(), cl *adstest.Recorder, client *adsclient.Client) {
		_, stopAgent := startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: sock, NetnsDir: dir,
			Phase1: true, CDSMode: agent.CDSProactive, DemandFile: file, Debounce: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		clientCtx, stopClient := context.WithCancel(ctx)
		cl, client, _ = dialAgent(clientCtx, t, sock)
		adstest.Eventually(t, "the first CDS response", func() bool { return cl.Has(resourcev3.ClusterType, contract.PassthroughCluster) })
		return func() { stopClient(); stopAgent() }, cl, client
	}
	stop, cl, client := start()
	if got := cl.Names(resourcev3.ClusterType); len(got) != 1 {
		t.Fatalf("first snapshot, on demand (ConfigMap), nothing asked: %v", got)
	}
	has := func(name string) func() bool { return func() bool { return cl.Has(resourcev3.ClusterType, name) } }
	client.SubscribeCluster(name["web"])
	adstest.Eventually(t, "web's cluster", has(name["web"]))

	cm.Data["cds"] = "proactive"
	if cm, err = c.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	adstest.Eventually(t, "every cluster (proactive)", has(name["other"]))
	cm.Data["cds"] = "on-demand"
	must(c.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}))
	adstest.Eventually(t, "other's cluster withdrawn", func() bool { return !has(name["other"])() })
	if !has(name["web"])() {
		t.Fatal("the demanded cluster went with the switch back")
	}
	stop()

	// Restarted: the demanded cluster is in the first response, before any request.
	stop, cl, _ = start()
	defer stop()
	want := []string{contract.PassthroughCluster, name["web"]}
	slices.Sort(want)
	if got := cl.Names(resourcev3.ClusterType); !slices.Equal(got, want) {
		t.Fatalf("first snapshot after restart %v, want %v", got, want)
	}
}
