package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/adsclient"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// scanPorts are the ports of the synthetic scan: 65,536 addresses × 4 ports = 262,144 names,
// 64 times the pending bound.
var scanPorts = []uint16{80, 443, 8080, 9090}

// TestOnDemandScanStaysBounded drives a scan of the whole 10.96.0.0/16 Service range on four
// ports through the agent, in requests of 4096 names as a proxy sends them, and checks that
// what the agent keeps stays bounded: the pending set at its cap, the heap, and the work of a
// sync after one Service changes (the names at its address, not every pending one). A Service
// created afterwards at a scanned address that was not kept is still published.
func TestOnDemandScanStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("scans 262,144 names")
	}
	f := newFixture(t)
	f.s.configureDemand(agentstatus.CDSOnDemand, DefaultOnDemandMax, "")
	f.addService(svcObj("web", "10.96.0.10"))
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	f.sync(t)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	batch := make([]string, 0, 4096)
	total := 0
	for a := range 1 << 16 {
		addr := netip.AddrFrom4([4]byte{10, 96, byte(a >> 8), byte(a)})
		for _, p := range scanPorts {
			batch = append(batch, contract.ClusterName(addr, p))
		}
		if len(batch) == cap(batch) || a == 1<<16-1 {
			f.s.ClusterDemand(batch, nil)
			total += len(batch)
			batch = batch[:0]
			f.sync(t)
		}
	}
	scanTook := time.Since(start)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)

	st := f.s.status.Load()
	t.Logf("scan of %d names: %s; pending %d (cap %d), demanded %d, heap %+d KiB (now %d KiB)",
		total, scanTook.Round(time.Millisecond), st.Pending, contract.OnDemandPendingMax, st.Demanded, grew>>10, after.HeapAlloc>>10)
	if st.Pending > contract.OnDemandPendingMax {
		t.Fatalf("pending %d after a scan of %d names, want at most %d", st.Pending, total, contract.OnDemandPendingMax)
	}
	if st.Demanded != 1 {
		t.Fatalf("demanded %d after the scan, want 1 (web's port 80)", st.Demanded)
	}
	const heapBound = 16 << 20
	if grew > heapBound {
		t.Fatalf("the heap grew by %d KiB over the scan, want under %d KiB", grew>>10, heapBound>>10)
	}

	// One Service created at a scanned address that was not kept (the pending set filled on
	// the first 1024 addresses): published, and the sync looks only at that address.
	late := netip.MustParseAddr("10.96.200.1")
	f.index.lookups.Store(0)
	f.addService(svcObj("late", late.String()))
	start = time.Now()
	f.sync(t)
	oneTook := time.Since(start)
	lookups := f.index.lookups.Load()
	if !slices.Contains(keys(f.s.set.Clusters), "svc:10.96.200.1:80") {
		t.Fatalf("Service at a scanned address not published: clusters %v", keys(f.s.set.Clusters))
	}
	if lookups > 64 {
		t.Fatalf("one Service change cost %d index lookups, want a few (the names at its address)", lookups)
	}
	// A Service at a pending address is admitted the same way.
	f.addService(svcObj("early", "10.96.1.1"))
	f.sync(t)
	if !slices.Contains(keys(f.s.set.Clusters), "svc:10.96.1.1:80") {
		t.Fatalf("Service at a pending address not published: clusters %v", keys(f.s.set.Clusters))
	}

	// The worst sync at the bound: the range moved, everything kept is re-checked.
	f.index.lookups.Store(0)
	f.index.bump()
	start = time.Now()
	f.sync(t)
	fullTook := time.Since(start)
	t.Logf("sync after one Service change: %s, %d lookups; after a range change (everything re-checked): %s, %d lookups",
		oneTook.Round(time.Microsecond), lookups, fullTook.Round(time.Microsecond), f.index.lookups.Load())
	if n := f.index.lookups.Load(); n > int64(contract.OnDemandPendingMax+DefaultOnDemandMax+1<<16) {
		t.Fatalf("a full re-check cost %d lookups, want at most the bound's %d", n, contract.OnDemandPendingMax+DefaultOnDemandMax+1<<16)
	}
	runtime.KeepAlive(f)
}

// BenchmarkOnDemandIntake is the cost of one scanned name through the agent at the bound.
func BenchmarkOnDemandIntake(b *testing.B) {
	f := newFixture(b)
	f.s.configureDemand(agentstatus.CDSOnDemand, DefaultOnDemandMax, "")
	f.sync(b)
	names := make([]string, 0, b.N)
	for i := range b.N {
		names = append(names, fmt.Sprintf("svc:10.96.%d.%d:%d", (i>>8)&255, i&255, 1+i>>16))
	}
	b.ResetTimer()
	for i := 0; i < len(names); i += 4096 {
		f.s.ClusterDemand(names[i:min(i+4096, len(names))], nil)
		f.sync(b)
	}
}

// TestOnDemandScanOverADS: a scan far over the pending bound through the real xDS server and
// the built-in proxy's client, asked for from many connections at once: every name reaches
// the agent (the stream keeps flowing while the agent answers the forgotten names), the
// client is told each forgotten name is removed, and a Service created afterwards at the last
// address scanned reaches it.
func TestOnDemandScanOverADS(t *testing.T) {
	if testing.Short() {
		t.Skip("scans 60,000 names")
	}
	f := newFixture(t)
	f.s.configureDemand(agentstatus.CDSOnDemand, DefaultOnDemandMax, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := xdsserver.New(ctx, f.index, f.reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetDemandHandler(f.s)
	f.s.pub = srv
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
	adstest.Eventually(t, "the wildcard's first response", func() bool { return rec.Has(resource.ClusterType, contract.PassthroughCluster) })

	const n = 60000
	names := make([]string, n)
	for i := range names {
		names[i] = contract.ClusterName(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), uint16(9000+i/65536))
	}
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := g; i < n; i += 64 {
				c.SubscribeCluster(names[i])
			}
		})
	}
	wg.Wait()
	refused := func() float64 { return testutil.ToFloat64(f.s.m.odRefused.WithLabelValues(contract.ReasonNoService)) }
	gomega.NewWithT(t).Eventually(refused).WithTimeout(60*time.Second).WithPolling(50*time.Millisecond).
		Should(gomega.BeNumerically("==", n), "names the agent saw")
	gomega.NewWithT(t).Eventually(func() int { return len(rec.Removed(resource.ClusterType)) }).WithTimeout(60*time.Second).
		WithPolling(50*time.Millisecond).Should(gomega.BeNumerically(">=", n-contract.OnDemandPendingMax), "names answered removed")
	if st := f.s.status.Load(); st.Pending != contract.OnDemandPendingMax {
		t.Fatalf("pending %d, want %d", st.Pending, contract.OnDemandPendingMax)
	}
	last := names[n-1]
	ap, _ := contract.ParseClusterName(last)
	f.addService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "late"}, Spec: corev1.ServiceSpec{
		ClusterIP: ap.Addr().String(), ClusterIPs: []string{ap.Addr().String()}, Ports: []corev1.ServicePort{{Name: "p", Port: int32(ap.Port()), Protocol: corev1.ProtocolTCP}}}})
	adstest.Eventually(t, "the last scanned name's cluster", func() bool { return rec.Has(resource.ClusterType, last) })
	if errs := rec.StreamErrors(); len(errs) > 0 {
		t.Fatalf("ADS stream broke: %v", errs)
	}
}
