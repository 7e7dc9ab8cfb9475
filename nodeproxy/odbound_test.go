package nodeproxy

import (
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/onsi/gomega"
	"google.golang.org/grpc"

	"github.com/aether-mesh/svclb/internal/adsclient"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestOnDemandScanKeepsLiveCluster: while a connection uses an on-demand cluster, a scan of
// three times contract.ProxyOnDemandAbsentMax destinations, each answered as not existing
// (as the agent answers names past its pending bound), leaves the proxy subscribed to at
// most the bound of them; the cluster in use, the oldest name, is never unsubscribed: its
// connection goes on and a new one is served without a discovery.
func TestOnDemandScanKeepsLiveCluster(t *testing.T) {
	lis := freePort(t)
	live := clusterOf(lis)
	backend := echoServer(t, "b")
	cache := adstest.NewLinear()
	var mu sync.Mutex
	// held is the proxy's subscription as the server sees it; unsubscribed every name it released.
	unsubscribed, held := map[string]bool{}, map[string]bool{}
	sock := filepath.Join(t.TempDir(), "xds.sock")
	adstest.Serve(t, sock, cache.Mux, func(_ int64, r *discoveryv3.DeltaDiscoveryRequest) {
		if r.TypeUrl != resourcev3.ClusterType {
			return
		}
		mu.Lock()
		for _, n := range r.ResourceNamesSubscribe {
			if n != "*" {
				held[n] = true
			}
		}
		for _, n := range r.ResourceNamesUnsubscribe {
			unsubscribed[n] = true
			delete(held, n)
		}
		mu.Unlock()
		var forget []string
		for _, n := range r.ResourceNamesSubscribe {
			switch n {
			case "*":
			case live: // admitted: published, as the agent does, off the stream's goroutine
				go func() {
					_ = cache.EDS.UpdateResource(live, loadAssignment(live, []netip.AddrPort{backend}))
					_ = cache.CDS.UpdateResource(live, translate.Cluster(live, contract.StatName("ns", "web", 80), false))
				}()
			default:
				forget = append(forget, n)
			}
		}
		r.ResourceNamesUnsubscribe = append(r.ResourceNamesUnsubscribe, forget...)
	}, func(s *grpc.Server) { alsv3.RegisterAccessLogServiceServer(s, &agent{}) })
	o := loopbackOptions(true)
	o.OnDemand = true
	l := captureListener(translate.CapturedPod{Namespace: "ns", Name: "pod"}, o, onLoopback(lis), onDemand(10*time.Second))
	if err := cache.CDS.UpdateResource(contract.PassthroughCluster, translate.PassthroughOriginalDst()); err != nil {
		t.Fatal(err)
	}
	if err := cache.LDS.UpdateResource(l.Name, l); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, sock)
	adstest.Eventually(t, "listener bound", func() bool { return len(activeListeners(p)) == 1 && p.ready.Load() })

	inUse := dialAndSend(t, lis, "one")
	inUse.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck
	got := make([]byte, len("b\none"))
	if _, err := io.ReadFull(inUse, got); err != nil || string(got) != "b\none" {
		t.Fatalf("the live cluster's connection got %q (%v)", got, err)
	}

	// The scan: the first discovery of each destination subscribes its name, as awaitCluster does.
	client := p.odcds.(*adsclient.Client)
	const bound = contract.ProxyOnDemandAbsentMax
	for i := range 3 * bound {
		client.SubscribeCluster(fmt.Sprintf("svc:10.96.%d.%d:%d", i>>8&255, i&255, 30000+i>>16))
	}
	gomega.NewWithT(t).Eventually(client.OnDemand).WithTimeout(60 * time.Second).WithPolling(20 * time.Millisecond).
		Should(gomega.Equal(adsclient.OnDemandCounts{Subscribed: bound + 1, Absent: bound, Evicted: 2 * bound}))

	adstest.Eventually(t, "the server's view", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) == bound+1 && held[live]
	})
	mu.Lock()
	gone := unsubscribed[live]
	mu.Unlock()
	if gone {
		t.Fatal("the live cluster's name was unsubscribed")
	}
	if _, err := io.WriteString(inUse, "two"); err != nil {
		t.Fatal(err)
	}
	got = make([]byte, len("two"))
	if _, err := io.ReadFull(inUse, got); err != nil || string(got) != "two" {
		t.Fatalf("the connection in use got %q (%v) after the scan", got, err)
	}
	if g := greet(t, lis); g != "b" || p.stats.value(svcStat("on_demand_cluster_attempt")) != 1 {
		t.Fatalf("after the scan: got %q, attempts %d", g, p.stats.value(svcStat("on_demand_cluster_attempt")))
	}
}
