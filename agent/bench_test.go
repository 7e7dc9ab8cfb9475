package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/pkg/contract"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

const (
	benchServices        = 10_000
	benchEndpointsPerSvc = 10 // 100k endpoints
)

func benchIP(base byte, i int) string {
	return fmt.Sprintf("10.%d.%d.%d", base, i/250, i%250+1)
}

// populate fills the fixture with benchServices Services of one port, each with one slice of
// benchEndpointsPerSvc ready endpoints.
func populate(f *fixture) []*discoveryv1.EndpointSlice {
	eps := make([]*discoveryv1.EndpointSlice, benchServices)
	for i := range benchServices {
		name := fmt.Sprintf("svc-%d", i)
		_ = f.services.Add(svcObj(name, benchIP(96, i)))
		ips := make([]string, benchEndpointsPerSvc)
		for j := range ips {
			ips[j] = benchIP(byte(128+j), i)
		}
		eps[i] = sliceObj(name, name+"-abc", ips...)
		_ = f.slices.Add(eps[i])
	}
	return eps
}

// BenchmarkFullSync builds the whole snapshot (10k Services / 100k endpoints) from scratch.
func BenchmarkFullSync(b *testing.B) {
	var heap uint64
	var cpu time.Duration
	runs := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		f := newFixture(b)
		populate(f)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		c0 := cpuTime()
		f.sync(b)
		cpu += cpuTime() - c0
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		if st := f.s.status.Load(); st.Clusters != benchServices+2 || st.Endpoints != benchServices*benchEndpointsPerSvc {
			b.Fatalf("status %d clusters %d endpoints", st.Clusters, st.Endpoints)
		}
		runtime.KeepAlive(f)
		runs++
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/(1<<20), "MiB-retained")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(runs), "cpu-ms/build")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serveXDS serves srv on a fresh unix socket until the test ends and returns the socket.
func serveXDS(tb testing.TB, srv *xdsserver.Server) string {
	tb.Helper()
	sock := filepath.Join(tb.TempDir(), "xds.sock")
	ln, err := xdsserver.Listen(sock)
	if err != nil {
		tb.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	go func() { _ = g.Serve(ln) }()
	tb.Cleanup(g.Stop)
	return sock
}

// deltaADS serves srv and opens a delta ADS stream to it, as the node proxy
// does; the stream and its connection end with the benchmark.
func deltaADS(ctx context.Context, b *testing.B, srv *xdsserver.Server) discoverygrpc.AggregatedDiscoveryService_DeltaAggregatedResourcesClient {
	b.Helper()
	sock := serveXDS(b, srv)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		// The first EDS response at 10k Services is ~4.5 MB, over gRPC's 4 MiB default.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	st, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

type nopIndex struct{}

func (nopIndex) Lookup(netip.AddrPort) svcindex.Result { return svcindex.Result{} }

// BenchmarkIncrementalPush measures one EndpointSlice change at 10k Services from the event
// to the delta EDS response arriving at a real gRPC client subscribed to every name.
func BenchmarkIncrementalPush(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := xdsserver.New(ctx, nopIndex{}, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	f := newFixture(b)
	f.s.pub = srv
	eps := populate(f)
	f.sync(b)

	st := deltaADS(ctx, b, srv)
	names := make([]string, 0, benchServices)
	for i := range benchServices {
		names = append(names, contract.ClusterName(netip.MustParseAddr(benchIP(96, i)), 80))
	}
	if err := st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names}); err != nil {
		b.Fatal(err)
	}
	recv := func() *discoverygrpc.DeltaDiscoveryResponse {
		r, err := st.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce}); err != nil {
			b.Fatal(err)
		}
		return r
	}
	if r := recv(); len(r.Resources) != benchServices {
		b.Fatalf("initial EDS: %d resources", len(r.Resources))
	}
	var lat []time.Duration
	i := 0
	cpu0 := cpuTime()
	for b.Loop() {
		es := eps[i%benchServices].DeepCopy()
		// Flip one endpoint's readiness: a real change each time.
		ready := es.Endpoints[0].Conditions.Ready
		es.Endpoints[0].Conditions.Ready = new(bool)
		*es.Endpoints[0].Conditions.Ready = !*ready
		eps[i%benchServices] = es
		_ = f.slices.Update(es)
		start := time.Now()
		f.s.sliceChanged(es)
		if err := f.s.sync(); err != nil {
			b.Fatal(err)
		}
		r := recv()
		lat = append(lat, time.Since(start))
		if len(r.Resources) != 1 {
			b.Fatalf("push carried %d resources, want 1", len(r.Resources))
		}
		i++
	}
	// CPU per push (agent + server + client) says more than wall time on a shared machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(lat)), "cpu-ms/push")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkOnDemandScan: at 10k Services in on-demand mode, one request naming every address
// of the /16 Service range (a port scan through the proxy). The snapshot stays bounded by
// --on-demand-max; the rest is refused and counted. Reported: the sync that classifies the scan
// and publishes what was admitted.
func BenchmarkOnDemandScan(b *testing.B) {
	f := newFixture(b)
	populate(f)
	const max = 1000
	var scan []string
	for i := range 1 << 16 {
		scan = append(scan, fmt.Sprintf("svc:10.96.%d.%d:80", i>>8, i&0xff))
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for b.Loop() {
		b.StopTimer()
		reg := prometheus.NewRegistry()
		m, err := newMetrics(reg)
		if err != nil {
			b.Fatal(err)
		}
		f.s = newSyncer(log, &recorder{}, f.s.services, f.slices, f.pods, f.s.netns, f.index, m, translate.Node{Name: "node-a"}, true, true)
		f.s.configureDemand(agentstatus.CDSOnDemand, max, "")
		f.sync(b)
		f.s.ClusterDemand(scan, nil)
		b.StartTimer()
		f.sync(b)
		b.StopTimer()
		if st := f.s.status.Load(); st.Clusters != max+2 || st.Demanded != max || st.Pending != len(scan)-max {
			b.Fatalf("after the scan: %d clusters, %d demanded, %d pending", st.Clusters, st.Demanded, st.Pending)
		}
		if got := testutil.ToFloat64(m.odRefused.WithLabelValues(contract.ReasonOverCap)); got != benchServices-max {
			b.Fatalf("over-cap refusals %v, want %d", got, benchServices-max)
		}
		b.StartTimer()
	}
}
