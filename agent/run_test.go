package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
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
	"github.com/aether-mesh/svclb/pkg/agentstatus"
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
			Phase1: true, CDSMode: agentstatus.CDSProactive, DemandFile: file, Debounce: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		clientCtx, stopClient := context.WithCancel(ctx)
		cl, client, _ = dialAgent(clientCtx, t, sock)
		adstest.Eventually(t, "the first CDS response", func() bool { return cl.Has(resourcev3.ClusterType, contract.PassthroughCluster) })
		return func() { stopClient(); stopAgent() }, cl, client
	}
	stop, cl, client := start()
	if got := cl.Names(resourcev3.ClusterType); len(got) != 2 { // blackhole, passthrough_original_dst
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
	want := []string{contract.BlackholeCluster, contract.PassthroughCluster, name["web"]}
	slices.Sort(want)
	if got := cl.Names(resourcev3.ClusterType); !slices.Equal(got, want) {
		t.Fatalf("first snapshot after restart %v, want %v", got, want)
	}
}

// TestRunSettingsBadValues runs the whole agent against a real kube-apiserver through agent
// ConfigMaps with bad values: a value that does not parse never changes its setting (it keeps
// the last good one; at start-up, before any, the Config default), /status and the metric name
// it, the agent warns once per change of the ConfigMap, and a fixed value clears it.
func TestRunSettingsBadValues(t *testing.T) {
	rc, c, ctx, _ := startAPIServer(t)
	cms := c.CoreV1().ConfigMaps(contract.Namespace)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap},
		Data: map[string]string{contract.KeyPhase1: "maybe", "phase_1": "false", contract.KeyCDS: "on-demand", contract.KeyNamespaceSelector: "team=a"}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	update := func(mutate func(map[string]string)) {
		t.Helper()
		mutate(cm.Data)
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	logs := &lockedBuffer{}
	addr, _ := startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: filepath.Join(dir, "xds.sock"), NetnsDir: dir,
		EnrollSocket: filepath.Join(dir, "enroll.sock"), Phase1: true, Phase2: true, CDSMode: agentstatus.CDSProactive,
		Debounce: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	// warnings counts the warnings (and errors) about the ConfigMap.
	warnings := func() int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "configmap="+contract.Namespace+"/"+contract.AgentConfigMap) &&
				(strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) {
				n++
			}
		}
		return n
	}
	// wantErr checks the error /status reports for key: the bad value quoted, the value kept.
	wantErr := func(errs map[string]map[string]string, key, value, kept string) {
		t.Helper()
		e, ok := errs[key]
		switch {
		case !ok:
			t.Errorf("/status settingsErrors has no %s: %v", key, errs)
		case e["value"] != value || e["kept"] != kept || e["reason"] == "":
			t.Errorf("/status settingsErrors %s = %v, want value %s, kept %q and a reason", key, e, value, kept)
		}
		if g := settingsErrorGauge(t, addr, key); g != 1 {
			t.Errorf("%s{key=%q} = %v, want 1", contract.MetricSettingsErrors, key, g)
		}
	}

	// Start-up: phase1 "maybe" has no good value to keep, so the Config default (on) holds.
	st, errs := status(t, addr), settingsErrors(t, addr)
	if !st.Phase1 || st.CDS != agentstatus.CDSOnDemand || st.Enrollment == nil || st.Enrollment.NamespaceSelector != "team=a" {
		t.Fatalf("start-up: phase1 %v cds %s enrollment %+v, want true (the default), on-demand, team=a", st.Phase1, st.CDS, st.Enrollment)
	}
	wantErr(errs, contract.KeyPhase1, `"maybe"`, "true")
	if e, ok := errs["phase_1"]; !ok || e["value"] != `"false"` {
		t.Errorf("the unknown key phase_1 is not reported: %v", errs)
	}
	if g := settingsErrorGauge(t, addr, contract.SettingsKeyUnknown); g != 1 {
		t.Errorf("%s{key=%q} = %v, want 1", contract.MetricSettingsErrors, contract.SettingsKeyUnknown, g)
	}

	// Good values clear the errors.
	update(func(d map[string]string) { d[contract.KeyPhase1] = "false"; delete(d, "phase_1") })
	adstest.Eventually(t, "phase1 off and no errors", func() bool { return !status(t, addr).Phase1 && len(settingsErrors(t, addr)) == 0 })
	if n := warnings(); n != 1 {
		t.Errorf("%d warnings about the start-up ConfigMap, want 1:\n%s", n, logs.String())
	}

	// phase1 "off" with Phase 1 off: it stays off.
	update(func(d map[string]string) { d[contract.KeyPhase1] = "off" })
	adstest.Eventually(t, "phase1 off reported", func() bool {
		_, bad := settingsErrors(t, addr)[contract.KeyPhase1]
		return bad || status(t, addr).Phase1
	})
	if status(t, addr).Phase1 {
		t.Fatal(`phase1 "off" turned Phase 1 on`)
	}
	wantErr(settingsErrors(t, addr), contract.KeyPhase1, `"off"`, "false")

	// A change that is not of the data logs nothing; cds "x" keeps on-demand.
	cm.Labels = map[string]string{"touched": "yes"}
	update(func(d map[string]string) {})
	update(func(d map[string]string) { d[contract.KeyCDS] = "x" })
	adstest.Eventually(t, "cds x reported", func() bool {
		_, bad := settingsErrors(t, addr)[contract.KeyCDS]
		return bad || status(t, addr).CDS != agentstatus.CDSOnDemand
	})
	if m := status(t, addr).CDS; m != agentstatus.CDSOnDemand {
		t.Fatalf(`cds "x" switched the mode to %s`, m)
	}
	errs = settingsErrors(t, addr)
	wantErr(errs, contract.KeyCDS, `"x"`, "on-demand")
	wantErr(errs, contract.KeyPhase1, `"off"`, "false")

	// A selector that does not parse keeps the previous one.
	update(func(d map[string]string) { d[contract.KeyNamespaceSelector] = "team in (a" })
	adstest.Eventually(t, "the bad selector reported", func() bool {
		_, bad := settingsErrors(t, addr)[contract.KeyNamespaceSelector]
		return bad
	})
	if sel := status(t, addr).Enrollment.NamespaceSelector; sel != "team=a" {
		t.Fatalf("a bad selector moved the selector to %q", sel)
	}
	wantErr(settingsErrors(t, addr), contract.KeyNamespaceSelector, `"team in (a"`, "team=a")
	if n := warnings(); n != 4 {
		t.Errorf("%d warnings about the ConfigMap, want 4 (start-up, phase1, cds, selector):\n%s", n, logs.String())
	}

	// Fixed: every error clears, the gauges return to 0.
	update(func(d map[string]string) {
		d[contract.KeyPhase1], d[contract.KeyCDS], d[contract.KeyNamespaceSelector] = "true", "proactive", "team=b"
	})
	adstest.Eventually(t, "fixed values in effect, no errors", func() bool {
		st := status(t, addr)
		return st.Phase1 && st.CDS == agentstatus.CDSProactive && st.Enrollment.NamespaceSelector == "team=b" && len(settingsErrors(t, addr)) == 0
	})
	for _, k := range []string{contract.KeyPhase1, contract.KeyPhase2, contract.KeyCDS, contract.KeyNamespaceSelector, contract.SettingsKeyUnknown} {
		if g := settingsErrorGauge(t, addr, k); g != 0 {
			t.Errorf("%s{key=%q} = %v after the fix, want 0", contract.MetricSettingsErrors, k, g)
		}
	}
}

// settingsErrors reads /status's settingsErrors by key, as the JSON document spells them (the
// field names are what operators and docs/architecture.md read).
func settingsErrors(t *testing.T, addr string) map[string]map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatalf("/status: %v", err)
	}
	defer resp.Body.Close()
	var doc struct {
		SettingsErrors []map[string]string `json:"settingsErrors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("/status: %v", err)
	}
	out := map[string]map[string]string{}
	for _, e := range doc.SettingsErrors {
		out[e["key"]] = e
	}
	return out
}

// settingsErrorGauge reads contract.MetricSettingsErrors{key}; -1: no such series.
func settingsErrorGauge(t *testing.T, addr, key string) float64 {
	t.Helper()
	for _, m := range families(t, addr)[contract.MetricSettingsErrors].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == contract.LabelKey && l.GetValue() == key {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
