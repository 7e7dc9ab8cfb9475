package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/adsclient"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func (f *fixture) addService(svc *corev1.Service) {
	_ = f.services.Add(svc)
	f.index.bumpAt(netip.MustParseAddr(svc.Spec.ClusterIP))
	f.s.serviceChanged(svc)
}

func (f *fixture) deleteService(svc *corev1.Service) {
	_ = f.services.Delete(svc)
	f.index.bumpAt(netip.MustParseAddr(svc.Spec.ClusterIP))
	f.s.serviceChanged(svc)
}

func onDemandOf(t testing.TB, l *listenerv3.Listener) *tcpproxyv3.TcpProxy_OnDemand {
	t.Helper()
	for _, fc := range l.GetFilterChains() {
		for _, fl := range fc.Filters {
			tp := &tcpproxyv3.TcpProxy{}
			if fl.GetTypedConfig().MessageIs(tp) {
				if err := fl.GetTypedConfig().UnmarshalTo(tp); err != nil {
					t.Fatal(err)
				}
				if tp.OnDemand != nil {
					return tp.OnDemand
				}
			}
		}
	}
	return nil
}

// TestOnDemandSyncer walks one syncer through the classes of a requested name, a Service that
// goes away under an admitted name, and live switches between the modes.
func TestOnDemandSyncer(t *testing.T) {
	f := newFixture(t)
	f.s.configureDemand(agentstatus.CDSOnDemand, DefaultOnDemandMax, "")
	web, other := svcObj("web", "10.96.0.10"), svcObj("other", "10.96.0.11")
	_ = f.services.Add(web)
	_ = f.services.Add(other)
	_ = f.slices.Add(sliceObj("web", "web-1", "10.244.1.5"))
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	f.sync(t)
	if got := keys(f.s.set.Clusters); !slices.Equal(got, []string{"blackhole", "passthrough_original_dst"}) {
		t.Fatalf("on demand, nothing asked: clusters %v", got)
	}
	od := onDemandOf(t, f.s.set.Listeners["capture~ns~client"])
	if od.GetOdcdsConfig().GetAds() == nil || od.GetOdcdsConfig().GetResourceApiVersion() != corev3.ApiVersion_V3 || od.GetTimeout().AsDuration() != translate.OnDemandTimeout {
		t.Fatalf("cap_svc on_demand %v", od)
	}

	f.s.ClusterDemand([]string{"svc:10.96.0.10:80", "svc:nope", "svc:192.168.0.1:80", "svc:10.96.0.99:80", "svc:10.96.0.10:81"}, nil)
	f.sync(t)
	if got := keys(f.pub.last().Clusters); !slices.Equal(got, []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("admitted: pushed %v", got)
	}
	if got := keys(f.pub.last().Loads); !slices.Equal(got, []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("admitted: loads %v", got)
	}
	for reason, want := range map[string]float64{contract.ReasonMalformed: 1, contract.ReasonExternal: 1, contract.ReasonNoService: 1,
		contract.ReasonPortNotDeclared: 1, contract.ReasonOverCap: 0, contract.ReasonKubeProxy: 0} {
		if got := testutil.ToFloat64(f.s.m.odRefused.WithLabelValues(reason)); got != want {
			t.Errorf("refused{%s} = %v, want %v", reason, got, want)
		}
	}
	st := f.s.status.Load()
	if st.CDS != agentstatus.CDSOnDemand || st.Demanded != 1 || st.Pending != 2 || st.Clusters != 3 {
		t.Fatalf("status cds=%s demanded=%d pending=%d clusters=%d, want on-demand 1 2 3 (malformed and external names are not kept)", st.CDS, st.Demanded, st.Pending, st.Clusters)
	}
	if v := testutil.ToFloat64(f.s.m.odAdmitted); v != 1 {
		t.Errorf("admitted_total %v", v)
	}
	// Asking again (a proxy reconnecting) changes nothing and counts nothing.
	n := len(f.pub.updates)
	f.s.ClusterDemand([]string{"svc:10.96.0.10:80"}, nil)
	f.sync(t)
	if len(f.pub.updates) != n || testutil.ToFloat64(f.s.m.odAdmitted) != 1 {
		t.Fatal("a repeated request pushed or counted")
	}

	// The pending port gets declared: admitted without a new request.
	web2 := web.DeepCopy()
	web2.Spec.Ports = append(web2.Spec.Ports, corev1.ServicePort{Name: "alt", Port: 81, Protocol: corev1.ProtocolTCP})
	_ = f.services.Update(web2)
	f.index.bump()
	f.s.serviceChanged(web2)
	f.sync(t)
	if got := keys(f.s.set.Clusters); !slices.Equal(got, []string{"blackhole", "passthrough_original_dst", "svc:10.96.0.10:80", "svc:10.96.0.10:81"}) {
		t.Fatalf("pending admitted: clusters %v", got)
	}
	if st := f.s.status.Load(); st.Demanded != 2 || st.Pending != 1 {
		t.Fatalf("demanded %d pending %d, want 2 1", st.Demanded, st.Pending)
	}

	// The Service goes away: its clusters go, the names wait in pending.
	f.deleteService(web2)
	f.sync(t)
	if u := f.pub.last(); !slices.Equal(sorted(u.DeleteClusters), []string{"svc:10.96.0.10:80", "svc:10.96.0.10:81"}) {
		t.Fatalf("Service gone: deleted %v", u.DeleteClusters)
	}
	if st := f.s.status.Load(); st.Demanded != 0 || st.Pending != 3 {
		t.Fatalf("demanded %d pending %d, want 0 3", st.Demanded, st.Pending)
	}
	f.addService(web)
	f.sync(t)
	if got := keys(f.s.set.Clusters); !slices.Equal(got, []string{"blackhole", "passthrough_original_dst", "svc:10.96.0.10:80"}) {
		t.Fatalf("Service back: clusters %v", got)
	}

	// Proactive: every Service port is published and cap_svc no longer asks.
	f.s.setCDSMode(agentstatus.CDSProactive)
	f.sync(t)
	if got := keys(f.s.set.Clusters); !slices.Equal(got, []string{"blackhole", "passthrough_original_dst", "svc:10.96.0.10:80", "svc:10.96.0.11:80"}) {
		t.Fatalf("proactive: clusters %v", got)
	}
	if od := onDemandOf(t, f.s.set.Listeners["capture~ns~client"]); od != nil {
		t.Fatalf("proactive listener carries on_demand %v", od)
	}
	if st := f.s.status.Load(); st.CDS != agentstatus.CDSProactive || st.Demanded != 1 {
		t.Fatalf("status after switch: cds %s demanded %d", st.CDS, st.Demanded)
	}
	// And back: the cluster nobody asked for is withdrawn, the listener asks again.
	f.s.setCDSMode(agentstatus.CDSOnDemand)
	f.sync(t)
	if u := f.pub.last(); !slices.Equal(u.DeleteClusters, []string{"svc:10.96.0.11:80"}) || !slices.Equal(keys(u.Listeners), []string{"capture~ns~client"}) {
		t.Fatalf("back to on-demand: deleted %v listeners %v", u.DeleteClusters, keys(u.Listeners))
	}
	if onDemandOf(t, f.s.set.Listeners["capture~ns~client"]) == nil {
		t.Fatal("on-demand listener without on_demand")
	}
	if err := translate.CheckReferences(f.s.set); err != nil {
		t.Fatalf("on-demand set fails the cross-reference check: %v", err)
	}
	// The /status document names them as the contract does.
	rec := httptest.NewRecorder()
	f.s.handler(f.reg, func() bool { return true }).ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["cds"] != "on-demand" || doc["demanded"] != 1.0 || doc["pending"] != 2.0 || doc["forgotten"] != 0.0 {
		t.Fatalf("/status cds=%v demanded=%v pending=%v forgotten=%v, want on-demand 1 2 0", doc["cds"], doc["demanded"], doc["pending"], doc["forgotten"])
	}
}

// TestProactiveUnchangedByDemand: in proactive mode a request changes nothing published.
func TestProactiveUnchangedByDemand(t *testing.T) {
	f := newFixture(t)
	_ = f.services.Add(svcObj("web", "10.96.0.10"))
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	f.sync(t)
	n := len(f.pub.updates)
	f.s.ClusterDemand([]string{"svc:10.96.0.10:80", "svc:10.96.0.99:80"}, nil)
	f.sync(t)
	if len(f.pub.updates) != n {
		t.Fatalf("proactive mode pushed on a request: %+v", f.pub.last())
	}
	if onDemandOf(t, f.s.set.Listeners["capture~ns~client"]) != nil {
		t.Fatal("proactive listener carries on_demand")
	}
	if st := f.s.status.Load(); st.CDS != agentstatus.CDSProactive || st.Demanded != 1 || st.Pending != 1 {
		t.Fatalf("status %+v", st)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestOnDemandOverADS drives on-demand CDS through the real delta ADS server with the client
// the built-in proxy runs (legacy wildcard first, then "*" plus names; names released).
func TestOnDemandOverADS(t *testing.T) {
	f := newFixture(t)
	f.s.configureDemand(agentstatus.CDSOnDemand, 2, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := xdsserver.New(ctx, f.index, f.reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetDemandHandler(f.s)
	f.s.pub = srv
	_ = f.services.Add(svcObj("web", "10.96.0.10"))
	_ = f.services.Add(svcObj("other", "10.96.0.11"))
	f.sync(t)
	sock := serveXDS(t, srv)
	never := make(chan struct{})
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		f.s.loop(ctx, func() <-chan struct{} { return never }, 5*time.Millisecond)
	}()
	defer func() { cancel(); <-loopDone }()

	rec := adstest.NewRecorder()
	c := &adsclient.Client{Node: &corev3.Node{Id: contract.NodeID("node-a"), Cluster: contract.NodeCluster}, Handler: rec, StreamEnded: rec.StreamEnded}
	adstest.Start(ctx, t, sock, c)
	has := func(name string) bool { return rec.Has(resource.ClusterType, name) }
	seen := func(name string) bool { return slices.Contains(rec.Seen(resource.ClusterType), name) }
	adstest.Eventually(t, "the wildcard's first response", func() bool { return has(contract.PassthroughCluster) })
	if got := rec.Names(resource.ClusterType); len(got) != 2 { // blackhole, passthrough_original_dst
		t.Fatalf("wildcard on demand: %v", got)
	}
	refused := func(reason string) float64 { return testutil.ToFloat64(f.s.m.odRefused.WithLabelValues(reason)) }
	// settle lets the client take whatever the agent still pushes, and fails if name arrives.
	settle := func(name string) {
		t.Helper()
		gomega.NewWithT(t).Consistently(func() bool { return seen(name) }).WithTimeout(200*time.Millisecond).WithPolling(10*time.Millisecond).
			Should(gomega.BeFalse(), "%s received", name)
	}

	// A known name: pushed to the waiting subscription; the wildcard stays.
	c.SubscribeCluster("svc:10.96.0.10:80")
	adstest.Eventually(t, "svc:10.96.0.10:80", func() bool { return has("svc:10.96.0.10:80") })

	// An unknown name: nothing, refused once, remembered.
	c.SubscribeCluster("svc:10.96.0.99:80")
	adstest.Eventually(t, "the refusal", func() bool { return refused(contract.ReasonNoService) == 1 })
	settle("svc:10.96.0.99:80")
	if p := f.s.status.Load().Pending; p != 1 {
		t.Fatalf("unknown name: pending %d", p)
	}
	// Its Service appears: the proxy, still subscribed, receives it without asking again.
	f.addService(svcObj("late", "10.96.0.99"))
	adstest.Eventually(t, "the late Service's cluster", func() bool { return has("svc:10.96.0.99:80") })
	if v := testutil.ToFloat64(f.s.m.odAdmitted); v != 2 {
		t.Fatalf("admitted_total %v, want 2", v)
	}

	// Cap 2: a third known name is refused over-cap and waits.
	c.SubscribeCluster("svc:10.96.0.11:80")
	adstest.Eventually(t, "the over-cap refusal", func() bool { return refused(contract.ReasonOverCap) == 1 })
	settle("svc:10.96.0.11:80")
	// Unsubscribing one frees room: its cluster goes, the waiting name is admitted.
	c.UnsubscribeCluster("svc:10.96.0.10:80")
	adstest.Eventually(t, "the swap", func() bool { return !has("svc:10.96.0.10:80") && has("svc:10.96.0.11:80") })
	if st := f.s.status.Load(); st.Demanded != 2 || st.Pending != 0 {
		t.Fatalf("after unsubscribe: demanded %d pending %d", st.Demanded, st.Pending)
	}

	// A scan of 5000 unallocated addresses in the range, pending capped at 1000: refused,
	// counted, nothing published; the first 1000 names pending, the others answered as not
	// existing (removed_resources) and only their addresses remembered.
	const pendingMax = 1000
	f.s.demand.mu.Lock()
	f.s.demand.pending.max = pendingMax
	f.s.demand.mu.Unlock()
	var scan []string
	for i := range 5000 {
		scan = append(scan, fmt.Sprintf("svc:10.96.%d.%d:80", 100+i/250, i%250+1))
	}
	for _, n := range scan {
		c.SubscribeCluster(n)
	}
	adstest.Eventually(t, "5000 refusals", func() bool { return refused(contract.ReasonNoService) == 5001 })
	adstest.Eventually(t, "the status after the scan", func() bool {
		st := f.s.status.Load()
		return st.Pending == pendingMax && st.Forgotten == len(scan)-pendingMax
	})
	adstest.Eventually(t, "the forgotten names answered", func() bool {
		return len(rec.Removed(resource.ClusterType)) >= len(scan)-pendingMax
	})
	if removed := rec.Removed(resource.ClusterType); slices.Contains(removed, scan[0]) || !slices.Contains(removed, scan[len(scan)-1]) {
		t.Fatalf("removed %d names: the pending %s among them %v, the forgotten %s %v", len(removed),
			scan[0], slices.Contains(removed, scan[0]), scan[len(scan)-1], slices.Contains(removed, scan[len(scan)-1]))
	}
	settle(scan[len(scan)-1])
	if want := []string{contract.BlackholeCluster, contract.PassthroughCluster, "svc:10.96.0.11:80", "svc:10.96.0.99:80"}; !slices.Equal(rec.Names(resource.ClusterType), want) || len(rec.Seen(resource.ClusterType)) != 5 {
		t.Fatalf("after the scan the client holds %v (ever saw %v), want %v", rec.Names(resource.ClusterType), rec.Seen(resource.ClusterType), want)
	}
	if st := f.s.status.Load(); st.Clusters != 4 || st.Demanded != 2 {
		t.Fatalf("status after the scan: %d clusters, %d demanded", st.Clusters, st.Demanded)
	}
	if v := testutil.ToFloat64(f.s.m.odPending); v != pendingMax {
		t.Fatalf("pending gauge %v, want %d", v, pendingMax)
	}
	// The first name scanned (pending) and the last (forgotten) get Services once there is
	// room: both reach the proxy, which never asks for them again.
	c.UnsubscribeCluster("svc:10.96.0.11:80")
	c.UnsubscribeCluster("svc:10.96.0.99:80")
	f.addService(svcObj("scanned", "10.96.100.1"))
	adstest.Eventually(t, "the first scanned name's cluster", func() bool { return has(scan[0]) })
	last, _ := contract.ParseClusterName(scan[len(scan)-1])
	f.addService(svcObj("scanned-last", last.Addr().String()))
	adstest.Eventually(t, "the last scanned name's cluster", func() bool { return has(scan[len(scan)-1]) })
	adstest.Eventually(t, "the status after the scanned names' Services", func() bool {
		st := f.s.status.Load()
		return st.Demanded == 2 && st.Pending == pendingMax-1 && st.Forgotten == len(scan)-pendingMax-1
	})
	if errs := rec.StreamErrors(); len(errs) > 0 {
		t.Fatalf("ADS stream broke: %v", errs)
	}
}

// TestDemandFile: the admitted set survives a restart and is in the first snapshot; names no
// longer known are dropped; a corrupt file is moved aside.
func TestDemandFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "svclb", "demand.json")
	f := newFixture(t)
	f.s.configureDemand(agentstatus.CDSOnDemand, DefaultOnDemandMax, file)
	for _, s := range []*corev1.Service{svcObj("web", "10.96.0.10"), svcObj("other", "10.96.0.11"), svcObj("gone", "10.96.0.12")} {
		_ = f.services.Add(s)
	}
	f.sync(t)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a file was written with nothing admitted: %v", err)
	}
	f.s.ClusterDemand([]string{"svc:10.96.0.12:80", "svc:10.96.0.10:80", "svc:10.96.0.99:80"}, nil)
	f.sync(t)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != `{"version":1,"clusters":["svc:10.96.0.10:80","svc:10.96.0.12:80"]}` {
		t.Fatalf("demand file %s", got)
	}

	// Restart: Service "gone" was deleted meanwhile.
	restart := func() *fixture {
		g := newFixture(t)
		g.s.configureDemand(agentstatus.CDSOnDemand, DefaultOnDemandMax, file)
		_ = g.services.Add(svcObj("web", "10.96.0.10"))
		_ = g.services.Add(svcObj("other", "10.96.0.11"))
		g.s.restoreDemand()
		g.sync(t)
		return g
	}
	g := restart()
	if len(g.pub.updates) != 1 {
		t.Fatalf("%d pushes, want the first snapshot only", len(g.pub.updates))
	}
	if got := keys(g.pub.updates[0].Clusters); !slices.Equal(got, []string{"blackhole", "passthrough_original_dst", "svc:10.96.0.10:80"}) {
		t.Fatalf("first snapshot after restart: %v", got)
	}
	if st := g.s.status.Load(); st.Demanded != 1 || st.Pending != 0 {
		t.Fatalf("restored: demanded %d pending %d", st.Demanded, st.Pending)
	}
	if v := testutil.ToFloat64(g.s.m.odAdmitted); v != 0 {
		t.Errorf("restored names counted as requests: %v", v)
	}
	var df demandFile
	if b, err := os.ReadFile(file); err != nil || json.Unmarshal(b, &df) != nil || !slices.Equal(df.Clusters, []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("file after a dropped name: %s %v", b, err)
	}

	// A corrupt file: moved aside, the agent starts empty and saves anew.
	if err := os.WriteFile(file, []byte(`{"version":1,"clusters":["svc:10.96`), 0o644); err != nil {
		t.Fatal(err)
	}
	g = restart()
	if st := g.s.status.Load(); st.Demanded != 0 {
		t.Fatalf("corrupt file: demanded %d", st.Demanded)
	}
	if b, err := os.ReadFile(file + ".corrupt"); err != nil || !strings.Contains(string(b), "svc:10.96") {
		t.Fatalf("corrupt file not kept aside: %v", err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("corrupt file still in place: %v", err)
	}
	// An unknown version does not parse either.
	if err := os.WriteFile(file, []byte(`{"version":2,"clusters":["svc:10.96.0.10:80"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadDemandFile(file); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("version 2 accepted: %v", err)
	}
}

// TestDemandFileThatIsNoFile: a demand file replaced by a FIFO, a symlink to /dev/zero or an
// oversized file is refused at once and moved aside; it never hangs the agent's start or fills
// its memory.
func TestDemandFileThatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, maxDemandFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, zero, big} {
		done := make(chan error, 1)
		go func() { _, err := loadDemandFile(path); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: loaded, want an error", path)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: loadDemandFile still reading after 10 s", path)
		}
		if _, err := os.Lstat(path + ".corrupt"); err != nil {
			t.Errorf("%s: not kept aside: %v", path, err)
		}
	}
}

// TestPendingSetKeepsOrder: names stay in arrival order, a name added again keeps its place,
// nothing is evicted, and a full set refuses a new name.
func TestPendingSetKeepsOrder(t *testing.T) {
	p := newPendingSet(3)
	a := netip.MustParseAddr("10.96.0.1")
	for _, n := range []string{"a", "b", "c", "b"} {
		p.add(n, a)
	}
	if p.add("x", a) || p.has("x") {
		t.Fatal("a fourth name was taken by a set of 3")
	}
	p.remove("a")
	p.add("d", a)
	if !slices.Equal(p.names(), []string{"b", "c", "d"}) || p.len() != 3 || !slices.Equal(p.byAddr.names(a), []string{"b", "c", "d"}) {
		t.Fatalf("pending %v (at %s: %v)", p.names(), a, p.byAddr.names(a))
	}
}

// A scan of the range is summed into one log line per reason per sync, not one per name.
func TestOnDemandRefusalsLogSummed(t *testing.T) {
	f := newFixture(t)
	var buf bytes.Buffer
	f.s.log = slog.New(slog.NewTextHandler(&buf, nil)) // Info and above, the default
	f.s.configureDemand(agentstatus.CDSOnDemand, DefaultOnDemandMax, "")
	_ = f.services.Add(svcObj("web", "10.96.0.10"))
	f.sync(t)
	var scan []string
	for i := range 500 {
		scan = append(scan, fmt.Sprintf("svc:10.96.1.%d:80", i%250+1), fmt.Sprintf("svc:10.96.2.%d:80", i%250+1))
	}
	f.s.ClusterDemand(append(scan, "svc:nope", "svc:10.96.0.10:81"), nil)
	buf.Reset()
	f.sync(t)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var summed []string
	for _, l := range lines {
		if strings.Contains(l, "on-demand cluster names refused") {
			summed = append(summed, l)
		}
	}
	if len(lines) > 5 {
		t.Fatalf("a 1002-name request logged %d lines at info level, want a few", len(lines))
	}
	if len(summed) != 3 {
		t.Fatalf("want one line each for no-service, malformed, port-not-declared; got %d:\n%s", len(summed), buf.String())
	}
	// Each of the 500 names is asked twice; a name already pending is not refused again.
	for _, want := range []string{"reason=no-service count=500", "reason=malformed count=1", "reason=port-not-declared count=1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %q in:\n%s", want, buf.String())
		}
	}
}

// A scan that lasts many syncs writes the first summaries and then holds the rest back (one per
// reason every contract.OnDemandRefusalLogEvery), counting what it holds back.
func TestOnDemandRefusalsLogRateLimited(t *testing.T) {
	f := newFixture(t)
	var buf bytes.Buffer
	f.s.log = slog.New(slog.NewTextHandler(&buf, nil))
	f.s.configureDemand(agentstatus.CDSOnDemand, DefaultOnDemandMax, "")
	f.sync(t)
	const syncs = 40
	for i := range syncs {
		var names []string
		for j := range 10 {
			names = append(names, fmt.Sprintf("svc:10.96.%d.%d:80", 1+i, 1+j))
		}
		f.s.ClusterDemand(names, nil)
		f.sync(t)
	}
	lines := strings.Count(buf.String(), "on-demand cluster names refused")
	if lines > contract.OnDemandRefusalLogBurst {
		t.Fatalf("%d syncs of refusals wrote %d summary lines, want at most %d:\n%s", syncs, lines, contract.OnDemandRefusalLogBurst, buf.String())
	}
	if got := testutil.ToFloat64(f.s.m.logSuppressed); got != float64(syncs-lines) {
		t.Fatalf("suppressed summaries counted %v, want %d", got, syncs-lines)
	}
}
