package agent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/refuse"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
)

// setAt reads the refuse set of the netns at path; ok is false without a table.
func setAt(t testing.TB, path string) (set map[netip.AddrPort]uint64, ok bool) {
	t.Helper()
	c, release, err := refuse.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	s, err := refuse.Counts(c)
	return s.NoEndpoints, err == nil
}

// tableAt reads the sets of the refuse table of the netns at path; ok is false without a table.
func tableAt(t testing.TB, path string) (sets refuse.Sets, ok bool) {
	t.Helper()
	c, release, err := refuse.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	s, err := refuse.List(c)
	return s, err == nil
}

// orderedPub checks, at each push, that the pod's set does not hold dst while the push carries
// dst's load assignment: a VIP:port leaves the set before the endpoints that fill its cluster
// are published, and enters it only after its cluster was published empty.
type orderedPub struct {
	t      *testing.T
	path   string
	dst    netip.AddrPort
	name   string
	pushes int
	loads  []*endpointv3.ClusterLoadAssignment
}

func (p *orderedPub) Apply(u xdsserver.Update) error {
	p.pushes++
	l, ok := u.Loads[p.name]
	if !ok {
		return nil
	}
	cla := l.(*endpointv3.ClusterLoadAssignment)
	p.loads = append(p.loads, cla)
	if set, _ := setAt(p.t, p.path); set != nil {
		if _, in := set[p.dst]; in {
			p.t.Errorf("push %d carries %s with %d localities while %s is in the pod's refuse set", p.pushes, p.name, len(cla.Endpoints), p.dst)
		}
	}
	return nil
}

// TestRefuserFollowsEndpoints: with refusal reset, a captured pod's refuse set holds exactly the
// Service ports whose cluster is published without an endpoint for the node (Local traffic
// policy included), each entering after the push that empties it and leaving before the push
// that fills it; the table goes with the setting and with the pod.
func TestRefuserFollowsEndpoints(t *testing.T) {
	ns := netnstest.New(t)
	f := newFixture(t)
	pub := &orderedPub{t: t, path: ns.Path(), dst: netip.MustParseAddrPort("10.96.0.10:80"), name: "svc:10.96.0.10:80"}
	f.s.pub = pub
	f.s.netns = fakeNetns{netip.MustParseAddr("10.244.1.3"): ns.Path()}
	f.s.reset = true
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	_ = f.services.Add(svcObj("web", "10.96.0.10"))
	in := func(want bool, what string) {
		t.Helper()
		set, ok := setAt(t, ns.Path())
		if !ok {
			t.Fatalf("%s: no refuse table in the pod's netns", what)
		}
		if _, got := set[pub.dst]; got != want {
			t.Fatalf("%s: %s in the set %v, want %v (set %v)", what, pub.dst, got, want, set)
		}
	}
	f.sync(t)
	in(true, "no endpoints")
	if n := len(pub.loads); n != 1 || len(pub.loads[0].Endpoints) != 0 {
		t.Fatalf("pushed loads %v, want one empty", pub.loads)
	}

	_ = f.slices.Add(sliceObj("web", "web-1", "10.244.1.5"))
	f.s.serviceChanged(svcObj("web", "10.96.0.10"))
	f.sync(t)
	in(false, "an endpoint")

	_ = f.slices.Update(sliceObj("web", "web-1"))
	f.s.serviceChanged(svcObj("web", "10.96.0.10"))
	f.sync(t)
	in(true, "the endpoint gone")

	// internalTrafficPolicy Local with the only endpoint on another node: refused.
	local := svcObj("web", "10.96.0.10")
	local.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	_ = f.services.Update(local)
	es := sliceObj("web", "web-1", "10.244.2.5")
	es.Endpoints[0].NodeName = ptr.To("node-b")
	_ = f.slices.Update(es)
	f.s.serviceChanged(local)
	f.sync(t)
	in(true, "Local policy, no local endpoint")
	es.Endpoints = append(es.Endpoints, es.Endpoints[0])
	es.Endpoints[1].Addresses = []string{"10.244.1.6"}
	es.Endpoints[1].NodeName = ptr.To("node-a")
	_ = f.slices.Update(es)
	f.s.serviceChanged(local)
	f.sync(t)
	in(false, "Local policy, a local endpoint")
	_ = f.slices.Update(sliceObj("web", "web-1"))
	f.s.serviceChanged(local)
	f.sync(t)
	in(true, "empty again")
	if len(pub.loads) != 5 { // the Local policy without a local endpoint is the same empty load
		t.Fatalf("%d pushes of %s, want 5", len(pub.loads), pub.name)
	}

	// The setting off: the table goes; on: it comes back with the set.
	f.s.setRefusal(false)
	f.sync(t)
	if _, ok := setAt(t, ns.Path()); ok {
		t.Fatal("refusal close: the table is still there")
	}
	f.s.setRefusal(true)
	f.sync(t)
	in(true, "refusal reset again")
	// The pod goes: so does its table.
	_ = f.pods.Delete(podObj("client", "node-a", "10.244.1.3", true))
	f.s.listenersChanged()
	f.sync(t)
	if _, ok := setAt(t, ns.Path()); ok {
		t.Fatal("pod gone: its table is still there")
	}
}

// TestRefuserFanOutCost measures what one refused destination entering or leaving costs the
// sync with SVCLB_REFUSE_PODS (default 50) captured pods on the node: one refuse-set
// transaction per pod, each through the pod's netns file (refuse.Open), in sequence. Each
// kind: a Service port emptying and filling (no-endpoints), a port the Service stops and starts
// declaring (port-not-declared: the declared set), a Service appearing and going (its VIP).
// docs/architecture.md has the figures.
func TestRefuserFanOutCost(t *testing.T) {
	n := 50
	if v := os.Getenv("SVCLB_REFUSE_PODS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			t.Fatal(err)
		}
	}
	r := newRefuser(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var pods []agentstatus.ListenerStatus
	for i := range n {
		ns := netnstest.New(t)
		pods = append(pods, agentstatus.ListenerStatus{Namespace: "ns", Name: fmt.Sprint("p", i), Netns: ns.Path()})
	}
	web := k8stypes.NamespacedName{Namespace: "ns", Name: "web"}
	d80, d81 := netip.MustParseAddrPort("10.96.0.10:80"), netip.MustParseAddrPort("10.96.0.10:81")
	served := func(ports ...netip.AddrPort) map[k8stypes.NamespacedName][]netip.AddrPort {
		return map[k8stypes.NamespacedName][]netip.AddrPort{web: ports}
	}
	rng := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	in := func(p published) refusing { return refusingInForce(true, p, rng, true) }
	r.reconcile(pods, in(published{served: served(d80, d81)}))
	q := func(d []time.Duration, f float64) time.Duration {
		slices.Sort(d)
		return d[int(f*float64(len(d)-1))]
	}
	const rounds = 100
	for _, c := range []struct {
		kind             string
		refused, served_ published // d80 refused (entering after the push), then served again (leaving before)
	}{
		{"no-endpoints (a Service port empties and fills)",
			published{refused: refused{d80: web}, served: served(d80, d81)}, published{served: served(d80, d81)}},
		{"port-not-declared (a port stops and starts being declared)",
			published{served: served(d81)}, published{served: served(d80, d81)}},
		{"port-not-declared (a Service, its VIP, appears and goes)",
			published{served: served(d81)}, published{}},
	} {
		var fan []time.Duration
		for i := range rounds {
			t0 := time.Now()
			if i%2 == 0 {
				r.reconcile(pods, in(c.refused)) // enters after the push
			} else {
				r.shrink(in(c.served_)) // leaves before the push
				r.reconcile(pods, in(c.served_))
			}
			fan = append(fan, time.Since(t0))
		}
		for _, p := range r.pods {
			if !p.installed {
				t.Fatalf("pod %s: no table", p.pod)
			}
		}
		t.Logf("%d pods, %s: one destination entering or leaving every pod's sets: p50 %v, p99 %v", n, c.kind, q(fan, .5), q(fan, .99))
		r.reconcile(pods, in(published{served: served(d80, d81)}))
	}
	// One pod's transaction alone, as refuser.update makes it (open by path, one flush).
	p := r.pods[pods[0].Netns]
	var one []time.Duration
	for i := range rounds {
		add, del := refuse.Sets{NoEndpoints: []netip.AddrPort{d80}}, refuse.Sets{}
		if i%2 == 1 {
			add, del = del, add
		}
		t0 := time.Now()
		if err := r.in(p, func(c *nftables.Conn) error { return refuse.Update(c, add, del) }); err != nil {
			t.Fatal(err)
		}
		one = append(one, time.Since(t0))
	}
	t.Logf("one pod's update: p50 %v, p99 %v", q(one, .5), q(one, .99))
}

// failingPub refuses every push.
type failingPub struct{}

func (failingPub) Apply(xdsserver.Update) error { return errors.New("push refused") }

// TestRefuserFailedPush: a push that fails leaves the pods' sets as the last good push had
// them: the proxy still has the empty cluster, so its VIP:port is refused again.
func TestRefuserFailedPush(t *testing.T) {
	ns := netnstest.New(t)
	f := newFixture(t)
	f.s.netns = fakeNetns{netip.MustParseAddr("10.244.1.3"): ns.Path()}
	f.s.reset = true
	dst := netip.MustParseAddrPort("10.96.0.10:80")
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	_ = f.services.Add(svcObj("web", "10.96.0.10"))
	f.sync(t)
	if set, _ := setAt(t, ns.Path()); set == nil || !hasKey(set, dst) {
		t.Fatalf("no endpoints: set %v, want %s", set, dst)
	}
	f.s.pub = failingPub{}
	_ = f.slices.Add(sliceObj("web", "web-1", "10.244.1.5"))
	f.s.serviceChanged(svcObj("web", "10.96.0.10"))
	if err := f.s.sync(); err == nil {
		t.Fatal("the sync did not fail")
	}
	if set, _ := setAt(t, ns.Path()); set == nil || !hasKey(set, dst) {
		t.Fatalf("after the failed push: set %v, want %s (the proxy kept the empty cluster)", set, dst)
	}
	f.s.pub = f.pub
	f.s.serviceChanged(svcObj("web", "10.96.0.10"))
	f.sync(t)
	if set, _ := setAt(t, ns.Path()); set == nil || hasKey(set, dst) {
		t.Fatalf("after the push that fills it: set %v, want no %s", set, dst)
	}
}

func hasKey(m map[netip.AddrPort]uint64, k netip.AddrPort) bool { _, ok := m[k]; return ok }
