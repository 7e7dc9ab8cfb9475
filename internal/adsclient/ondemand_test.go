package adsclient

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// scanNames are n distinct names of a scan of the Service range.
func scanNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("svc:10.%d.%d.%d:%d", 96+(i>>16)%16, (i>>8)&255, i&255, 30000+i/(1<<20))
	}
	return out
}

// odServer is an ADS server that sees, per stream, the on-demand names the client has
// subscribed (its view of the subscription), the largest request, and answers every name it
// has no cluster for as removed, as the agent does past its pending bound
// (agent/internal/xdsserver forget.go: the name is added to the request's unsubscribe list).
type odServer struct {
	*server
	forget bool

	mu sync.Mutex
	// byStream is the client's subscription per stream, by server start and stream id.
	gen      int
	byStream map[[2]int64]map[string]bool
	unsubbed map[string]bool // every name ever unsubscribed
	largest  int             // the largest request's encoded size
	requests int
}

func newODServer(t *testing.T, forget bool) *odServer {
	s := &odServer{server: &server{sock: t.TempDir() + "/ads.sock", cache: adstest.NewLinear()}, forget: forget,
		byStream: map[[2]int64]map[string]bool{}, unsubbed: map[string]bool{}}
	s.start(t)
	return s
}

func (s *odServer) start(t *testing.T) {
	s.mu.Lock()
	s.gen++
	gen := int64(s.gen)
	s.mu.Unlock()
	s.srv = adstest.Serve(t, s.sock, s.cache.Mux, func(id int64, r *discoveryv3.DeltaDiscoveryRequest) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests++
		s.largest = max(s.largest, proto.Size(r))
		if r.TypeUrl != resourcev3.ClusterType {
			return
		}
		key := [2]int64{gen, id}
		set := s.byStream[key]
		if set == nil {
			set = map[string]bool{}
			s.byStream[key] = set
		}
		var forget []string
		for _, n := range r.ResourceNamesSubscribe {
			if n == wildcard {
				continue
			}
			set[n] = true
			if _, ok := s.cache.CDS.GetResources()[n]; !ok && s.forget {
				forget = append(forget, n)
			}
		}
		for _, n := range r.ResourceNamesUnsubscribe {
			delete(set, n)
			s.unsubbed[n] = true
		}
		r.ResourceNamesUnsubscribe = append(r.ResourceNamesUnsubscribe, forget...)
	})
}

// subscribed is the client's subscription as the latest stream of the latest server start
// has it (none when that server has seen no stream yet).
func (s *odServer) subscribed() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last [2]int64
	for k := range s.byStream {
		if k[0] == int64(s.gen) && k[1] > last[1] {
			last = k
		}
	}
	return maps.Clone(s.byStream[last])
}

func (s *odServer) stats() (largest, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.largest, s.requests
}

// TestReconnectOverMessageLimit: a client subscribed to more names than fit in one
// gRPC message (4 MiB, the server's default receive limit) gets its stream back after the
// server restarts, with every name subscribed on the new stream and no request over
// maxRequestBytes. Before requests were split, the new stream's first request carried every
// name, the server refused it (ResourceExhausted) and ended the stream, and so every one
// after it: the stream never came back.
func TestReconnectOverMessageLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("subscribes 200,000 names")
	}
	s := newODServer(t, false)
	h := adstest.NewRecorder()
	c := newClient(h)
	adstest.Start(context.Background(), t, s.sock, c)
	const n = 200000
	names := scanNames(n)
	total := 0
	for _, name := range names {
		total += nameSize(fieldSubscribe, name)
	}
	if total <= 4<<20 {
		t.Fatalf("the names take %d bytes: not over 4 MiB", total)
	}
	// Asked for on the live stream in steps the server takes, as a scan does.
	for i := 0; i < n; i += 20000 {
		for _, name := range names[i : i+20000] {
			c.SubscribeCluster(name)
		}
		adstest.Eventually(t, "the names so far", func() bool { return len(s.subscribed()) == i+20000 })
	}
	s.srv.Stop()
	s.start(t)
	gomega.NewWithT(t).Eventually(func() int { return len(s.subscribed()) }).WithTimeout(60*time.Second).
		WithPolling(50*time.Millisecond).Should(gomega.Equal(n), "names subscribed on the new stream")
	if err := s.cache.CDS.UpdateResource(names[n-1], cluster(names[n-1])); err != nil {
		t.Fatal(err)
	}
	adstest.Eventually(t, "a cluster pushed on the new stream", func() bool { return h.Has(resourcev3.ClusterType, names[n-1]) })
	if errs := h.StreamErrors(); len(errs) != 1 {
		t.Fatalf("stream ends %v, want the one restart", errs)
	}
	if largest, _ := s.stats(); largest > maxRequestBytes {
		t.Fatalf("a request of %d bytes, over %d", largest, maxRequestBytes)
	}
}

// TestOnDemandScanStaysBounded: a scan of ten times the bound's distinct names, each answered
// as not existing, leaves at most contract.ProxyOnDemandAbsentMax of them subscribed, on the
// client and as the server sees it; the name with a cluster, subscribed first (the oldest),
// is never unsubscribed and its cluster stays.
func TestOnDemandScanStaysBounded(t *testing.T) {
	s := newODServer(t, true)
	h := adstest.NewRecorder()
	c := newClient(h)
	adstest.Start(context.Background(), t, s.sock, c)
	const live = "svc:10.95.0.1:80"
	if err := s.cache.CDS.UpdateResource(live, cluster(live)); err != nil {
		t.Fatal(err)
	}
	c.SubscribeCluster(live)
	adstest.Eventually(t, "the live cluster", func() bool { return h.Has(resourcev3.ClusterType, live) && c.OnDemand().Subscribed == 1 })

	const bound = contract.ProxyOnDemandAbsentMax
	n := 10 * bound
	names := scanNames(n)
	for i, name := range names {
		c.SubscribeCluster(name)
		if got := c.OnDemand().Absent; got > bound {
			t.Fatalf("after %d names: %d absent kept, over %d", i+1, got, bound)
		}
	}
	gomega.NewWithT(t).Eventually(func() OnDemandCounts { return c.OnDemand() }).WithTimeout(60 * time.Second).
		WithPolling(20 * time.Millisecond).Should(gomega.Equal(OnDemandCounts{Subscribed: bound + 1, Absent: bound, Evicted: uint64(n - bound)}))
	adstest.Eventually(t, "the server's view", func() bool { return len(s.subscribed()) == bound+1 })
	got := s.subscribed()
	if !got[live] || s.unsubbed[live] {
		t.Fatalf("the live name: subscribed %v, ever unsubscribed %v", got[live], s.unsubbed[live])
	}
	for _, name := range names[n-bound:] { // the most recent are kept
		if !got[name] {
			t.Fatalf("%s, among the last %d dialled, not subscribed", name, bound)
		}
	}
	if !h.Has(resourcev3.ClusterType, live) {
		t.Fatal("the live cluster was removed")
	}
	if largest, _ := s.stats(); largest > maxRequestBytes {
		t.Fatalf("a request of %d bytes, over %d", largest, maxRequestBytes)
	}
}

// answer is a CDS response's resources (present names).
func answer(names ...string) []*discoveryv3.Resource {
	out := make([]*discoveryv3.Resource, len(names))
	for i, n := range names {
		out[i] = &discoveryv3.Resource{Name: n}
	}
	return out
}

func newOnDemand(bound int) *onDemand {
	o := &onDemand{}
	o.init(bound)
	return o
}

// TestOnDemandEvictsLeastRecentlyDialledAbsent: past the bound the absent name dialled
// least recently goes; dialling an absent name again makes it the most recent; present and
// unanswered names never go, however old; a released name asked for again is subscribed
// again.
func TestOnDemandEvictsLeastRecentlyDialledAbsent(t *testing.T) {
	o := newOnDemand(2)
	for _, n := range []string{"live", "waiting", "a", "b", "c"} {
		o.subscribe(n)
	}
	if sub, unsub := o.changes(); len(sub) != 5 || len(unsub) != 0 {
		t.Fatalf("first changes %q %q", sub, unsub)
	}
	o.answered(answer("live"), []string{"a", "b"})
	o.subscribe("a") // dialled again: b is now the oldest absent
	if released, _ := o.answered(nil, []string{"c"}); released != 1 {
		t.Fatalf("released %d, want 1", released)
	}
	if sub, unsub := o.changes(); len(sub) != 0 || !slices.Equal(unsub, []string{"b"}) {
		t.Fatalf("after c: subscribe %q unsubscribe %q, want b released", sub, unsub)
	}
	// The live cluster removed by the server: now absent, and the oldest one.
	o.answered(nil, []string{"live"})
	if sub, unsub := o.changes(); len(sub) != 0 || !slices.Equal(unsub, []string{"a"}) {
		t.Fatalf("after live removed: subscribe %q unsubscribe %q, want a released", sub, unsub)
	}
	if got := o.all(); !slices.Equal(got, []string{"live", "waiting", "c"}) {
		t.Fatalf("kept %q", got)
	}
	o.subscribe("b")
	if sub, unsub := o.changes(); !slices.Equal(sub, []string{"b"}) || len(unsub) != 0 {
		t.Fatalf("b again: subscribe %q unsubscribe %q", sub, unsub)
	}
}

// TestOnDemandChangesNeverBoth: a request never subscribes and unsubscribes one name
// (go-control-plane applies the subscription first, so the name would be dropped). A name
// released and asked for again before the release went out is subscribed again (Envoy's
// removed-then-added); asked for and released before anything went out, nothing is sent.
func TestOnDemandChangesNeverBoth(t *testing.T) {
	o := newOnDemand(0)
	o.subscribe("a")
	o.subscribe("b")
	o.changes()
	o.unsubscribe("a")
	o.subscribe("a")
	o.subscribe("c")
	o.unsubscribe("c")
	o.unsubscribe("b")
	o.subscribe("b")
	o.unsubscribe("b")
	sub, unsub := o.changes()
	if !slices.Equal(sub, []string{"a"}) || !slices.Equal(unsub, []string{"b"}) {
		t.Fatalf("subscribe %q unsubscribe %q, want [a] [b]", sub, unsub)
	}
	if sub, unsub := o.changes(); len(sub)+len(unsub) != 0 {
		t.Fatalf("sent twice: %q %q", sub, unsub)
	}
}

// TestSplit: names spread over requests that each stay under the bound, in order, the
// first keeping what else it carries; a name over the bound goes alone.
func TestSplit(t *testing.T) {
	names := scanNames(1000)
	r := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType,
		InitialResourceVersions: map[string]string{"x": "1"}, ResourceNamesSubscribe: names[:700], ResourceNamesUnsubscribe: names[700:]}
	const limit = 2000
	out := split(proto.Clone(r).(*discoveryv3.DeltaDiscoveryRequest), limit)
	if len(out) < 10 {
		t.Fatalf("%d requests", len(out))
	}
	var sub, unsub []string
	for i, q := range out {
		if size := proto.Size(q); size > limit {
			t.Fatalf("request %d: %d bytes", i, size)
		}
		if (len(q.InitialResourceVersions) > 0) != (i == 0) || q.TypeUrl != r.TypeUrl {
			t.Fatalf("request %d: %v", i, q)
		}
		sub, unsub = append(sub, q.ResourceNamesSubscribe...), append(unsub, q.ResourceNamesUnsubscribe...)
	}
	if !slices.Equal(sub, r.ResourceNamesSubscribe) || !slices.Equal(unsub, r.ResourceNamesUnsubscribe) {
		t.Fatal("names lost or reordered")
	}
	big := string(make([]byte, 3*limit))
	out = split(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: []string{"a", big, "b"}}, limit)
	if len(out) != 3 || !slices.Equal(out[1].ResourceNamesSubscribe, []string{big}) {
		t.Fatalf("a name over the bound: %d requests", len(out))
	}
}
