package adsclient

import (
	"runtime"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/svclb/pkg/contract"
)

const benchNames = 200000

// measure runs f and returns how long it took and how much the live heap grew, with what f
// returns kept alive. The collections around f are not timed (b.Loop's ns/op includes them).
func measure(f func() any) (time.Duration, uint64, any) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	v := f()
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	return took, after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc), v
}

// BenchmarkOnDemandSubscribe: 200,000 names subscribed and sent (none answered: what Envoy,
// or the built-in proxy with no bound, holds after a scan the agent leaves unanswered), and
// the heap they hold.
func BenchmarkOnDemandSubscribe(b *testing.B) {
	names := scanNames(benchNames)
	var heap uint64
	var took time.Duration
	for b.Loop() {
		var kept any
		took, heap, kept = measure(func() any {
			o := newOnDemand(-1)
			for _, n := range names {
				o.subscribe(n)
			}
			o.changes()
			return o
		})
		runtime.KeepAlive(kept)
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(heap)/benchNames, "heap-B/name")
	b.ReportMetric(float64(took.Milliseconds()), "subscribe-ms")
}

// BenchmarkOnDemandReconnect: a new stream's CDS subscription of 200,000 names, built and
// split into requests under maxRequestBytes.
func BenchmarkOnDemandReconnect(b *testing.B) {
	o := newOnDemand(-1)
	for _, n := range scanNames(benchNames) {
		o.subscribe(n)
	}
	o.changes()
	var reqs int
	for b.Loop() {
		r := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: explicitCDS(o.all(), false)}
		reqs = len(split(r, maxRequestBytes))
	}
	b.ReportMetric(float64(reqs), "requests")
}

// BenchmarkOnDemandScanBounded: a scan of 200,000 names, each answered as removed in
// responses of 1000, with the bound of contract.ProxyOnDemandAbsentMax: the time to take
// it, and the heap the set keeps after it.
func BenchmarkOnDemandScanBounded(b *testing.B) {
	names := scanNames(benchNames)
	var heap uint64
	var took time.Duration
	var kept int
	for b.Loop() {
		var o any
		took, heap, o = measure(func() any {
			o := newOnDemand(contract.ProxyOnDemandAbsentMax)
			for i := 0; i < len(names); i += 1000 {
				for _, n := range names[i : i+1000] {
					o.subscribe(n)
				}
				o.changes()
				o.answered(nil, names[i:i+1000])
				o.changes()
			}
			return o
		})
		kept = len(o.(*onDemand).byName)
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(kept), "names-kept")
	b.ReportMetric(float64(took.Milliseconds()), "scan-ms")
}
