package agent

import (
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/svclb/internal/translate/translatetest"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// rangeActions maps each prefix of a listener's filter_chain_matcher to the chain it selects,
// the node-local ones (cap_refused, in every listener: TestNodeLocalRefused) left out.
func rangeActions(t *testing.T, l *listenerv3.Listener) map[string]string {
	t.Helper()
	out := map[string]string{}
	if l.GetFilterChainMatcher() == nil {
		return out
	}
	ipm := &matcherv3.IPMatcher{}
	if err := l.GetFilterChainMatcher().GetMatcherTree().GetCustomMatch().GetTypedConfig().UnmarshalTo(ipm); err != nil {
		t.Fatal(err)
	}
	for _, rm := range ipm.GetRangeMatchers() {
		sv := &wrapperspb.StringValue{}
		if err := rm.GetOnMatch().GetAction().GetTypedConfig().UnmarshalTo(sv); err != nil {
			t.Fatal(err)
		}
		for _, r := range rm.GetRanges() {
			if sv.Value != contract.ChainRefused {
				out[prefixOf(r).String()] = sv.Value
			}
		}
	}
	return out
}

func prefixOf(r *xdscorev3.CidrRange) netip.Prefix {
	return netip.PrefixFrom(netip.MustParseAddr(r.GetAddressPrefix()), int(r.GetPrefixLen().GetValue()))
}

// TestAPIServerServiceStaysKubeProxys: default/kubernetes gets no svc: cluster, in either CDS
// mode, and its VIP passes through (a /32 to cap_passthrough_svc) in both phases, so Phase 2
// never refuses it; the listener follows the Service when it appears after the first sync.
func TestAPIServerServiceStaysKubeProxys(t *testing.T) {
	f := newFixture(t)
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	_ = f.services.Add(svcObj("web", "10.96.0.10"))
	f.sync(t)
	const lis = "capture~ns~client"
	if got := rangeActions(t, f.s.set.Listeners[lis]); len(got) != 1 {
		t.Fatalf("before the apiserver's Service: matcher %v", got)
	}

	api := translatetest.APIServerService()
	f.addService(api)
	f.sync(t)
	if got := keys(f.s.set.Clusters); !slices.Equal(got, []string{contract.BlackholeCluster, contract.PassthroughCluster, "svc:10.96.0.10:80"}) {
		t.Fatalf("clusters %v, want none for %s", got, contract.APIServerService)
	}
	want := map[string]string{"10.96.0.0/16": contract.ChainSvc, "10.96.0.1/32": contract.ChainPassthroughSvc}
	l := f.s.set.Listeners[lis]
	if got := rangeActions(t, l); !maps.Equal(got, want) {
		t.Fatalf("phase 1+2: matcher %v, want %v", got, want)
	}
	if c := chains(l); c != "cap_svc,cap_passthrough_svc" {
		t.Fatalf("phase 1+2: chains %s", c)
	}

	// Phase 1 off: the whole range passes through already.
	f.s.setPhases(false, true)
	f.sync(t)
	if got := rangeActions(t, f.s.set.Listeners[lis]); !maps.Equal(got, map[string]string{"10.96.0.0/16": contract.ChainPassthroughSvc}) {
		t.Fatalf("phase 1 off: matcher %v", got)
	}

	// On demand: a request for it is refused, never admitted.
	f.s.setPhases(true, true)
	f.s.configureDemand(agentstatus.CDSOnDemand, DefaultOnDemandMax, "")
	f.s.setCDSMode(agentstatus.CDSOnDemand)
	f.s.ClusterDemand([]string{"svc:10.96.0.1:443"}, nil)
	f.sync(t)
	if got := testutil.ToFloat64(f.s.m.odRefused.WithLabelValues(contract.ReasonKubeProxy)); got != 1 {
		t.Errorf("refused{%s} = %v, want 1", contract.ReasonKubeProxy, got)
	}
	if st := f.s.status.Load(); st.Demanded != 0 {
		t.Errorf("demanded %d, want 0", st.Demanded)
	}
	if got := rangeActions(t, f.s.set.Listeners[lis]); !maps.Equal(got, want) {
		t.Fatalf("on demand: matcher %v, want %v", got, want)
	}

	// Gone: its /32 goes with it.
	f.deleteService(api)
	f.sync(t)
	if got := rangeActions(t, f.s.set.Listeners[lis]); len(got) != 1 {
		t.Fatalf("after the apiserver's Service went: matcher %v", got)
	}
}

// syncLog is a concurrency-safe log sink.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServiceRangeSaidOncePerChange: the agent warns once each time the Service range
// becomes unknown (not on every sync), says once when it is known again, and
// svclb_service_range_known follows.
func TestServiceRangeSaidOncePerChange(t *testing.T) {
	f := newFixture(t)
	logs := &syncLog{}
	f.s.log = slog.New(slog.NewTextHandler(logs, nil))
	const warn, known = `level=WARN msg="Service range unknown`, `level=INFO msg="Service range known" range=[10.96.0.0/16]`
	step := func(what string, rangeKnown bool, warns, knowns int) {
		t.Helper()
		f.index.known = rangeKnown
		f.s.listenersChanged()
		f.sync(t)
		f.sync(t) // nothing changed: nothing said
		if n := logs.count(warn); n != warns {
			t.Errorf("%s: %d warnings, want %d", what, n, warns)
		}
		if n := logs.count(known); n != knowns {
			t.Errorf("%s: %d 'known' lines, want %d", what, n, knowns)
		}
		want := 0.0
		if rangeKnown {
			want = 1
		}
		if got := testutil.ToFloat64(f.s.m.rangeKnown); got != want {
			t.Errorf("%s: %s = %v, want %v", what, contract.MetricServiceRangeKnown, got, want)
		}
	}
	step("unknown at start", false, 1, 0)
	step("still unknown", false, 1, 0)
	step("known", true, 1, 1)
	step("still known", true, 1, 1)
	step("unknown again", false, 2, 1)
	step("known again", true, 2, 2)
}
