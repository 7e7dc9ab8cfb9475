package svcindex

import (
	"log/slog"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func fixtureFactory() informers.SharedInformerFactory {
	return informers.NewSharedInformerFactory(fake.NewClientset(), 0)
}

// bareIndex is an Index that is never Run: tests feed its handlers directly,
// as the informers would.
func bareIndex(tb testing.TB, opts Options) *Index {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	x, err := newIndex(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return x
}

func TestDuplicateClusterIPIsDeterministic(t *testing.T) {
	a := svc("a", "first", []string{"10.96.0.10"}, tcp("http", 80, i8080))
	b := svc("b", "second", []string{"10.96.0.10"}, tcp("grpc", 9000, i8080))
	c := svc("c", "third", []string{"10.96.0.10"}, tcp("x", 7, i8080))
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}} {
		x := bareIndex(t, Options{})
		x.setServiceCIDR(serviceCIDR("k", "10.96.0.0/16"))
		objs := []any{a, b, c}
		for _, i := range order {
			x.setService(objs[i])
		}
		if got, want := x.Lookup(netip.MustParseAddrPort("10.96.0.10:80")), known("a", "first", "10.96.0.10", 80, "http", i8080); got != want {
			t.Fatalf("order %v: got %+v, want %+v", order, got, want)
		}
		if got, want := x.Lookup(netip.MustParseAddrPort("10.96.0.10:9000")), portNotDeclared("a", "first"); got != want {
			t.Fatalf("order %v: got %+v, want %+v", order, got, want)
		}
		// Only the answering claimant's ports are Known.
		if ps := x.ServicePorts(); len(ps) != 1 || ps[0].Service != nn("a", "first") {
			t.Fatalf("order %v: ServicePorts() = %v", order, ps)
		}
		x.deleteService(cache.DeletedFinalStateUnknown{Key: "a/first", Obj: a})
		if got, want := x.Lookup(netip.MustParseAddrPort("10.96.0.10:9000")), known("b", "second", "10.96.0.10", 9000, "grpc", i8080); got != want {
			t.Fatalf("order %v after delete: got %+v, want %+v", order, got, want)
		}
		x.deleteService(c) // a shadowed claimant leaves: nothing visible changes
		x.deleteService(b)
		if got := x.Lookup(netip.MustParseAddrPort("10.96.0.10:9000")); got != noService {
			t.Fatalf("order %v after deleting all: got %+v", order, got)
		}
	}
}

func TestVersionBumpsOnlyOnChange(t *testing.T) {
	x := bareIndex(t, Options{})
	v0 := x.Version()
	ch := x.Changed()
	x.setServiceCIDR(serviceCIDR("k", "10.96.0.0/16"))
	select {
	case <-ch:
	default:
		t.Fatal("range change did not close Changed()")
	}
	v1 := x.Version()
	if v1 <= v0 {
		t.Fatalf("version %d -> %d", v0, v1)
	}
	s := svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080))
	x.setService(s)
	v2 := x.Version()
	ch = x.Changed()
	// Same content again (a resync, or a status-only update): no bump.
	x.setService(s.DeepCopy())
	x.setServiceCIDR(serviceCIDR("k", "10.96.0.0/16"))
	x.deleteService(svc("ns", "never-indexed", nil))
	if x.Version() != v2 {
		t.Fatalf("no-op updates bumped the version %d -> %d", v2, x.Version())
	}
	select {
	case <-ch:
		t.Fatal("Changed() closed without a change")
	default:
	}
	x.setService(svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, intstr.FromInt32(8081))))
	if x.Version() <= v2 {
		t.Fatal("a targetPort change did not bump the version")
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{External: "external", NoService: "no-service", PortNotDeclared: "port-not-declared", Known: "known", 9: "unknown"} {
		if c.String() != want {
			t.Errorf("%d.String() = %q, want %q", c, c.String(), want)
		}
	}
	var zero Result
	if zero.Class != External {
		t.Error("zero Result is not External")
	}
}

func TestPrefixesMergeAndSplit(t *testing.T) {
	p := netip.MustParsePrefix
	for _, c := range []struct {
		in, want []string
	}{
		{nil, nil},
		{[]string{"10.96.0.0/16"}, []string{"10.96.0.0/16"}},
		{[]string{"10.96.0.7/16"}, []string{"10.96.0.0/16"}}, // normalised
		{[]string{"10.97.0.0/16", "10.96.0.0/16"}, []string{"10.96.0.0/15"}},
		{[]string{"10.96.0.0/16", "10.96.3.0/24"}, []string{"10.96.0.0/16"}},
		{[]string{"10.95.0.0/16", "10.96.0.0/16"}, []string{"10.95.0.0/16", "10.96.0.0/16"}}, // adjacent, not aligned
		{[]string{"10.0.0.1/32", "10.0.0.2/32", "10.0.0.3/32"}, []string{"10.0.0.1/32", "10.0.0.2/31"}},
		{[]string{"0.0.0.0/0", "10.0.0.0/8"}, []string{"0.0.0.0/0"}},
		{[]string{"255.255.255.255/32", "255.255.255.254/32"}, []string{"255.255.255.254/31"}},
		{[]string{"0.0.0.0/1", "128.0.0.0/1"}, []string{"0.0.0.0/0"}},
	} {
		var sp []span
		for _, s := range c.in {
			sp = append(sp, spanOf(p(s)))
		}
		var got []string
		for _, q := range prefixesOf(mergeSpans(sp)) {
			got = append(got, q.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: got %v, want %v", c.in, got, c.want)
		}
	}
}
