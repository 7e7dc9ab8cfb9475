package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/agent/internal/netnsfind"
	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

type recorder struct{ updates []xdsserver.Update }

func (r *recorder) Apply(u xdsserver.Update) error { r.updates = append(r.updates, u); return nil }
func (r *recorder) last() xdsserver.Update {
	if len(r.updates) == 0 {
		return xdsserver.Update{}
	}
	return r.updates[len(r.updates)-1]
}

type fakeNetns map[netip.Addr]string

func (f fakeNetns) Find(ip netip.Addr) (string, error) {
	if p, ok := f[ip]; ok {
		return p, nil
	}
	return "", errors.New("not found")
}

func (f fakeNetns) Snapshot() func() { return func() {} }

// fakeIndex answers like pkg/svcindex from the fixture's Service store; Version moves only
// when a test says the index changed (bump), as the real one does on every Service event.
type fakeIndex struct {
	p        []netip.Prefix
	known    bool
	services cache.Indexer // with byClusterIP
	version  atomic.Uint64
	lookups  atomic.Int64 // Lookup calls, for the tests that bound the re-check work

	mu      sync.Mutex
	changes [][]netip.Addr // per version from 1: the addresses it touched; nil: everything
}

const byClusterIP = "clusterIP"

func clusterIPIndex(o any) ([]string, error) {
	return []string{o.(*corev1.Service).Spec.ClusterIP}, nil
}

func (f *fakeIndex) Range() ([]netip.Prefix, bool) { return f.p, f.known }
func (f *fakeIndex) Version() uint64               { return f.version.Load() }

// bump says the index changed in a way the agent must re-check in full; bumpAt that it
// changed only at addrs (ChangesSince reports them).
func (f *fakeIndex) bump() { f.bumpAt() }

func (f *fakeIndex) bumpAt(addrs ...netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, addrs)
	f.version.Add(1)
}

func (f *fakeIndex) ChangesSince(since uint64) (svcindex.Changes, uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.version.Load()
	var c svcindex.Changes
	for v := since + 1; v <= now; v++ {
		if f.changes[v-1] == nil {
			return svcindex.Changes{RangeMoved: true}, now, true
		}
		c.IPs = append(c.IPs, f.changes[v-1]...)
	}
	return c, now, true
}

func (f *fakeIndex) Lookup(dst netip.AddrPort) svcindex.Result {
	f.lookups.Add(1)
	if !f.known || !slices.ContainsFunc(f.p, func(p netip.Prefix) bool { return p.Contains(dst.Addr()) }) {
		return svcindex.Result{Class: svcindex.External}
	}
	objs, _ := f.services.ByIndex(byClusterIP, dst.Addr().String())
	if len(objs) == 0 {
		return svcindex.Result{Class: svcindex.NoService}
	}
	svc := objs[0].(*corev1.Service) // the tests give each Service its own ClusterIP
	key := k8stypes.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	for _, p := range svc.Spec.Ports {
		if p.Port == int32(dst.Port()) {
			return svcindex.Result{Class: svcindex.Known, Service: key, Port: svcindex.ServicePort{
				Service: key, ClusterIP: dst.Addr(), Port: dst.Port(), PortName: p.Name, TargetPort: p.TargetPort}}
		}
	}
	return svcindex.Result{Class: svcindex.PortNotDeclared, Service: key}
}

type fixture struct {
	s        *syncer
	pub      *recorder
	services cache.Indexer
	slices   cache.Indexer
	pods     cache.Indexer
	index    *fakeIndex
	reg      *prometheus.Registry
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{
		pub:      &recorder{},
		services: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, byClusterIP: clusterIPIndex}),
		slices:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byServiceIndex: sliceIndex}),
		pods:     cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		reg:      prometheus.NewRegistry(),
	}
	f.index = &fakeIndex{p: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}, known: true, services: f.services}
	m, err := newMetrics(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	f.s = newSyncer(slog.New(slog.NewTextHandler(io.Discard, nil)), f.pub, corelisters.NewServiceLister(f.services), f.slices, f.pods,
		fakeNetns{netip.MustParseAddr("10.244.1.3"): "/var/run/netns/cni-1"}, f.index, m, translate.Node{Name: "node-a", Zone: "zone-a"}, true, true)
	return f
}

func (f *fixture) sync(t testing.TB) {
	t.Helper()
	if err := f.s.sync(); err != nil {
		t.Fatal(err)
	}
}

func svcObj(name, ip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{
		ClusterIP: ip, ClusterIPs: []string{ip}, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
}

func sliceObj(svc, name string, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func podObj(name, node, ip string, captured bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{PodIP: ip, Phase: corev1.PodRunning}}
	if captured {
		p.Labels[contract.CapturedLabel] = "true"
	}
	return p
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestSyncIncremental(t *testing.T) {
	f := newFixture(t)
	// A slice before its Service waits.
	_ = f.slices.Add(sliceObj("web", "web-1", "10.244.1.5"))
	f.s.sliceChanged(f.slices.List()[0])
	f.sync(t)
	if got := keys(f.pub.last().Clusters); !slices.Equal(got, []string{"blackhole", "passthrough_original_dst"}) {
		t.Fatalf("before the Service: clusters %v", got)
	}
	svc := svcObj("web", "10.96.0.10")
	_ = f.services.Add(svc)
	_ = f.services.Add(svcObj("other", "10.96.0.11"))
	f.s.serviceChanged(svc)
	f.sync(t)
	u := f.pub.last()
	if got := keys(u.Clusters); !slices.Equal(got, []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("only the changed Service is built: %v", got)
	}
	if st := f.s.status.Load(); st.Endpoints != 1 || st.Clusters != 3 || st.SnapshotVersion != 2 {
		t.Fatalf("status %+v", st)
	}
	// A second slice merges; only the load assignment changes.
	s2 := sliceObj("web", "web-2", "10.244.2.5")
	s2.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().Add(-2 * time.Second).Format(time.RFC3339Nano)}
	_ = f.slices.Add(s2)
	f.s.sliceChanged(s2)
	f.sync(t)
	u = f.pub.last()
	if len(u.Clusters) != 0 || !slices.Equal(keys(u.Loads), []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("slice change: clusters %v loads %v", keys(u.Clusters), keys(u.Loads))
	}
	if n := f.s.set.Loads["svc:10.96.0.10:80"].Endpoints[0].LbEndpoints; len(n) != 2 {
		t.Fatalf("merged endpoints: %d", len(n))
	}
	var pm dto.Metric
	if err := f.s.m.programming.Write(&pm); err != nil {
		t.Fatal(err)
	}
	if h := pm.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() < 2 {
		t.Fatalf("programming latency not observed from the trigger time: %v", h)
	}
	// Nothing changed: nothing pushed.
	n := len(f.pub.updates)
	f.s.serviceChanged(svc)
	f.sync(t)
	if len(f.pub.updates) != n {
		t.Fatalf("an unchanged rebuild pushed %v", f.pub.last())
	}
	// Service deleted: its cluster and load go, the slices stay for later.
	_ = f.services.Delete(svc)
	f.s.serviceChanged(svc)
	f.sync(t)
	if u := f.pub.last(); !slices.Equal(u.DeleteClusters, []string{"svc:10.96.0.10:80"}) || !slices.Equal(u.DeleteLoads, []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("delete: %+v", u)
	}
}

// chains names a listener's filter chains but cap_refused, which every listener has
// (TestNodeLocalRefused).
func chains(l *listenerv3.Listener) string {
	var out []string
	for _, fc := range l.FilterChains {
		if fc.Name != contract.ChainRefused {
			out = append(out, fc.Name)
		}
	}
	return strings.Join(out, ",")
}

func TestListenersAndPhases(t *testing.T) {
	f := newFixture(t)
	_ = f.services.Add(svcObj("web", "10.96.0.10"))
	_ = f.slices.Add(sliceObj("web", "web-1", "10.244.1.5"))
	for _, p := range []*corev1.Pod{
		podObj("client", "node-a", "10.244.1.3", true),
		podObj("plain", "node-a", "10.244.1.4", false),    // not captured
		podObj("elsewhere", "node-b", "10.244.2.3", true), // other node
		podObj("pending", "node-a", "", true),             // no IP yet
		podObj("nonetns", "node-a", "10.244.1.9", true),   // netns not found yet
	} {
		_ = f.pods.Add(p)
	}
	f.sync(t)
	st := f.s.status.Load()
	if len(st.Listeners) != 1 || st.Listeners[0] != (agentstatus.ListenerStatus{Pod: "client", Namespace: "ns", Netns: "/var/run/netns/cni-1", Name: "capture~ns~client"}) {
		t.Fatalf("listeners %+v", st.Listeners)
	}
	if f.s.retry == nil {
		t.Error("an unresolved captured pod schedules a retry")
	}
	l := f.s.set.Listeners["capture~ns~client"]
	if chains(l) != "cap_svc" {
		t.Fatalf("phase 1 on: chains %s", chains(l))
	}
	// Phase 1 off: svc clusters withdrawn, the range goes to cap_passthrough_svc, same listener name.
	f.s.setPhases(false, true)
	f.sync(t)
	u := f.pub.last()
	if !slices.Equal(u.DeleteClusters, []string{"svc:10.96.0.10:80"}) || !slices.Equal(keys(u.Listeners), []string{"capture~ns~client"}) || len(u.DeleteListeners) != 0 {
		t.Fatalf("phase 1 off: %+v", u)
	}
	if c := chains(f.s.set.Listeners["capture~ns~client"]); c != "cap_passthrough_svc" {
		t.Fatalf("phase 1 off: chains %s", c)
	}
	if st := f.s.status.Load(); st.Phase1 || !st.Phase2 || st.Clusters != 2 {
		t.Fatalf("status after flip %+v", st)
	}
	f.s.setPhases(true, false)
	f.sync(t)
	if !slices.Equal(keys(f.pub.last().Clusters), []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("phase 1 back on: %v", keys(f.pub.last().Clusters))
	}
	// The pod goes: its listener is withdrawn.
	_ = f.pods.Delete(podObj("client", "node-a", "10.244.1.3", true))
	f.s.listenersChanged()
	f.sync(t)
	if !slices.Equal(f.pub.last().DeleteListeners, []string{"capture~ns~client"}) {
		t.Fatalf("pod gone: %+v", f.pub.last())
	}
}

// TestListenersAmbiguousNetns: a captured pod whose IP a second namespace also holds (a pod
// adding its neighbour's address to take its capture listener) has no listener while that
// lasts, and the warning naming both files is not repeated on every rebuild or toggle.
func TestListenersAmbiguousNetns(t *testing.T) {
	prereq.Command(t, "ip")
	dir := t.TempDir()
	victim, thief := netnstest.New(t), netnstest.New(t)
	// The thief's link sorts first: a first-match search would take it.
	thiefPath, victimPath := filepath.Join(dir, "a-thief"), filepath.Join(dir, "b-victim")
	for path, ns := range map[string]*netnstest.NS{thiefPath: thief, victimPath: victim} {
		if err := os.Symlink(ns.Path(), path); err != nil {
			t.Fatal(err)
		}
	}
	addr := func(ns *netnstest.NS, op string) {
		t.Helper()
		if out, err := exec.Command("ip", "-n", ns.Name(), "addr", op, "10.244.1.20/32", "dev", "lo").CombinedOutput(); err != nil {
			t.Fatalf("ip addr %s: %v: %s", op, err, out)
		}
	}
	f := newFixture(t)
	var logs strings.Builder
	f.s.log = slog.New(slog.NewTextHandler(&logs, nil))
	clk := testingclock.NewFakeClock(time.Now())
	f.s.clock = clk
	f.s.netns = &netnsfind.Scanner{Dir: dir}
	_ = f.pods.Add(podObj("victim", "node-a", "10.244.1.20", true))
	const name = "capture~ns~victim"
	rebuild := func() {
		t.Helper()
		f.s.listenersChanged()
		f.sync(t)
	}
	warnings := func() int { return strings.Count(logs.String(), "level=WARN") }
	bound := func(want string) {
		t.Helper()
		l := f.s.set.Listeners[name]
		got := l.GetAddress().GetSocketAddress().GetNetworkNamespaceFilepath()
		if want == "" && l != nil || want != "" && got != want {
			t.Fatalf("listener %s in %q (present %v), want %q\n%s", name, got, l != nil, want, logs.String())
		}
	}

	addr(victim, "add")
	f.sync(t)
	bound(victimPath)

	addr(thief, "add")
	rebuild()
	bound("")
	if u := f.pub.last(); !slices.Contains(u.DeleteListeners, name) {
		t.Fatalf("the bound listener is not withdrawn: %+v", u)
	}
	if warnings() != 1 || !strings.Contains(logs.String(), "pod=ns/victim") ||
		!strings.Contains(logs.String(), thiefPath) || !strings.Contains(logs.String(), victimPath) {
		t.Fatalf("want one warning naming the pod and both files:\n%s", logs.String())
	}
	if f.s.retry == nil {
		t.Error("an ambiguous pod schedules a retry (the copy may go without a Kubernetes event)")
	}
	rebuild() // the retry
	rebuild()
	bound("")
	// The thief drops the copy and adds it again: the listener comes back, goes again, and the
	// toggle is not a second warning within the window.
	addr(thief, "del")
	rebuild()
	bound(victimPath)
	addr(thief, "add")
	rebuild()
	bound("")
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings within the window, want 1:\n%s", n, logs.String())
	}
	clk.Step(ambiguousWarnEvery)
	rebuild()
	if n := warnings(); n != 2 {
		t.Fatalf("%d warnings after the window, want 2:\n%s", n, logs.String())
	}
}

func TestInvalidNeverPublished(t *testing.T) {
	f := newFixture(t)
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	f.sync(t)
	n, before := len(f.pub.updates), f.s.set.Listeners["capture~ns~client"]
	f.index.p = []netip.Prefix{{}} // a garbage range: the matcher's prefix fails ValidateAll
	f.s.listenersChanged()
	if err := f.s.sync(); err == nil {
		t.Fatal("invalid listener accepted")
	}
	if len(f.pub.updates) != n || f.s.set.Listeners["capture~ns~client"] != before {
		t.Fatal("invalid configuration published or adopted")
	}
	if v := testutil.ToFloat64(f.s.m.rejected); v != 1 {
		t.Errorf("rejected counter %v", v)
	}
}

// TestLoopCoalescesBursts: a burst of changes to 200 Services costs at most two pushes (the
// first change at once, the rest together after the debounce), and nothing is lost.
func TestLoopCoalescesBursts(t *testing.T) {
	f := newFixture(t)
	f.sync(t)
	before := len(f.pub.updates)
	var objs []*corev1.Service
	for i := range 200 {
		svc := svcObj(fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.1.%d", i+1))
		_ = f.services.Add(svc)
		objs = append(objs, svc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	never := make(chan struct{})
	go func() {
		defer close(done)
		f.s.loop(ctx, func() <-chan struct{} { return never }, 100*time.Millisecond)
	}()
	for _, svc := range objs {
		f.s.serviceChanged(svc)
	}
	adstest.Eventually(t, "201 clusters published", func() bool { return f.s.status.Load().Clusters == 202 }) // and blackhole, passthrough_original_dst
	cancel()
	<-done
	if pushes := len(f.pub.updates) - before; pushes < 1 || pushes > 2 {
		t.Errorf("a burst of 200 changes made %d pushes, want 1 or 2", pushes)
	}
}
