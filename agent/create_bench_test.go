package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
)

// createBase is how many Services exist before BenchmarkCreateOneByOne adds more: the perf
// suite's larger size (e2e/perf/), the size its CPU and RSS goals are stated at (docs/perf.md).
const createBase = 5000

// BenchmarkCreateOneByOne is what the agent does while Services are created one after the
// other (a deployment rolling out, the perf suite's scale run): at createBase Services, each
// iteration adds one Service and its EndpointSlice of three endpoints, syncs, and waits until
// a delta ADS client that subscribed like the node proxy (CDS wildcard, EDS by name) has the
// new cluster and its assignment. cpu-ms/service is the whole process (agent, xDS server,
// client): the per-Service cost that a one-shot full sync (BenchmarkFullSync) hides.
func BenchmarkCreateOneByOne(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := xdsserver.New(ctx, nopIndex{}, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	f := newFixture(b)
	f.s.pub = srv
	add := func(i int) {
		name := fmt.Sprintf("svc-%d", i)
		svc := svcObj(name, benchIP(96, i))
		es := sliceObj(name, name+"-abc", benchIP(128, i), benchIP(129, i), benchIP(130, i))
		_ = f.services.Add(svc)
		_ = f.slices.Add(es)
		f.s.serviceChanged(svc)
		f.s.sliceChanged(es)
	}
	for i := range createBase {
		add(i)
	}
	f.sync(b)

	st := deltaADS(ctx, b, srv)
	// The proxy's order: CDS wildcard; EDS for the clusters it learns of; ACK everything.
	recv := func(typeURL string) *discoverygrpc.DeltaDiscoveryResponse {
		for {
			r, err := st.Recv()
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce}); err != nil {
				b.Fatal(err)
			}
			if r.TypeUrl == typeURL {
				return r
			}
		}
	}
	subscribeEDS := func(r *discoverygrpc.DeltaDiscoveryResponse) {
		var names []string
		for _, c := range r.Resources {
			if c.Name != "passthrough_original_dst" && c.Name != "blackhole" {
				names = append(names, c.Name)
			}
		}
		if len(names) == 0 {
			b.Fatalf("CDS response without a svc: cluster")
		}
		if err := st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names}); err != nil {
			b.Fatal(err)
		}
		if e := recv(resource.EndpointType); len(e.Resources) != len(names) {
			b.Fatalf("EDS: %d assignments for %d clusters", len(e.Resources), len(names))
		}
	}
	if err := st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}}); err != nil {
		b.Fatal(err)
	}
	subscribeEDS(recv(resource.ClusterType))

	i := createBase
	cpu0, t0 := cpuTime(), time.Now()
	for b.Loop() {
		add(i)
		if err := f.s.sync(); err != nil {
			b.Fatal(err)
		}
		subscribeEDS(recv(resource.ClusterType))
		i++
	}
	n := float64(i - createBase)
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/n, "cpu-ms/service")
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000/n, "wall-ms/service")
}
