package svcindex

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	i8080 = intstr.FromInt32(8080)
	sHTTP = intstr.FromString("http")
)

func TestClassifyEveryRule(t *testing.T) {
	udp := corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}
	sctp := corev1.ServicePort{Name: "sig", Protocol: corev1.ProtocolSCTP, Port: 3868}
	selectorless := svc("db", "pg", []string{"10.96.0.11"}, tcp("pg", 5432, intstr.FromInt32(5432)))
	selectorless.Spec.Selector = nil
	headless := svc("ns", "headless", []string{corev1.ClusterIPNone}, tcp("web", 80, i8080))
	// The apiserver clears clusterIP for ExternalName; set one anyway to prove the type decides.
	extName := svc("ns", "extname", []string{"10.96.0.14"}, tcp("web", 80, i8080))
	extName.Spec.Type = corev1.ServiceTypeExternalName
	extName.Spec.ExternalName = "example.com"
	noProto := svc("ns", "noproto", []string{"10.96.0.15"}, corev1.ServicePort{Port: 9000}) // protocol and targetPort left to defaulting

	f := newFixture(t, fixtureOpts{objects: []runtime.Object{
		serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:10:96::/112"),
		svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080), tcp("https", 443, sHTTP)),
		selectorless,
		svc("kube-system", "dns-udp", []string{"10.96.0.12"}, udp),
		svc("kube-system", "dns", []string{"10.96.0.13"}, udp, tcp("dns-tcp", 53, intstr.FromInt32(5353))),
		svc("ns", "sctp", []string{"10.96.0.16"}, sctp),
		headless, extName, noProto,
		svc("ns", "dual", []string{"fd00:10:96::20", "10.96.0.20"}, tcp("http", 80, i8080)),
		svc("ns", "v6only", []string{"fd00:10:96::21"}, tcp("http", 80, i8080)),
		svc("ns", "pending", nil, tcp("http", 80, i8080)), // no ClusterIP allocated yet
	}})

	for _, c := range []struct {
		dst  string
		want Result
	}{
		{"10.96.0.10:80", known("ns", "web", "10.96.0.10", 80, "http", i8080)},
		{"10.96.0.10:443", known("ns", "web", "10.96.0.10", 443, "https", sHTTP)},
		{"10.96.0.10:81", portNotDeclared("ns", "web")},
		{"10.96.0.11:5432", known("db", "pg", "10.96.0.11", 5432, "pg", intstr.FromInt32(5432))},
		{"10.96.0.12:53", portNotDeclared("kube-system", "dns-udp")},
		{"10.96.0.13:53", known("kube-system", "dns", "10.96.0.13", 53, "dns-tcp", intstr.FromInt32(5353))},
		{"10.96.0.16:3868", portNotDeclared("ns", "sctp")},
		{"10.96.0.14:80", noService}, // ExternalName: not indexed
		{"10.96.0.15:9000", known("ns", "noproto", "10.96.0.15", 9000, "", intstr.FromInt32(9000))},
		{"10.96.0.20:80", known("ns", "dual", "10.96.0.20", 80, "http", i8080)},
		{"[fd00:10:96::20]:80", external},
		{"[fd00:10:96::21]:80", external},
		{"[::ffff:10.96.0.10]:80", known("ns", "web", "10.96.0.10", 80, "http", i8080)},
		{"10.96.0.99:80", noService},
		{"10.96.255.255:1", noService},
		{"10.97.0.1:80", external},
		{"192.168.1.1:80", external},
	} {
		if got := f.x.Lookup(netip.MustParseAddrPort(c.dst)); got != c.want {
			t.Errorf("Lookup(%s) = %+v, want %+v", c.dst, got, c.want)
		}
	}

	ps, ok := f.x.Range()
	if !ok || !slices.Equal(ps, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}) {
		t.Errorf("Range() = %v, %v; want [10.96.0.0/16], true", ps, ok)
	}

	var got []string
	for _, p := range f.x.ServicePorts() {
		got = append(got, p.Service.String()+" "+netip.AddrPortFrom(p.ClusterIP, p.Port).String()+" "+p.PortName+" "+p.TargetPort.String())
	}
	want := []string{
		"db/pg 10.96.0.11:5432 pg 5432",
		"kube-system/dns 10.96.0.13:53 dns-tcp 5353",
		"ns/dual 10.96.0.20:80 http 8080",
		"ns/noproto 10.96.0.15:9000  9000",
		"ns/web 10.96.0.10:80 http 8080",
		"ns/web 10.96.0.10:443 https http",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ServicePorts() =\n%q\nwant\n%q", got, want)
	}
}

func TestServiceRecreatedWithNewClusterIP(t *testing.T) {
	f := newFixture(t, fixtureOpts{objects: []runtime.Object{
		serviceCIDR("kubernetes", "10.96.0.0/16"),
		svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080)),
	}})
	f.expect("10.96.0.10:80", known("ns", "web", "10.96.0.10", 80, "http", i8080))
	v, changed := f.x.Version(), f.x.Changed()

	f.deleteService("ns", "web")
	f.expect("10.96.0.10:80", noService)
	select {
	case <-changed:
	default:
		t.Fatal("Changed() channel not closed after a change")
	}
	if f.x.Version() <= v {
		t.Fatalf("Version did not increase: %d -> %d", v, f.x.Version())
	}
	f.create(svc("ns", "web", []string{"10.96.0.30"}, tcp("http", 80, i8080)))
	f.expect("10.96.0.30:80", known("ns", "web", "10.96.0.30", 80, "http", i8080))
	f.expect("10.96.0.10:80", noService)
}

func TestServiceClusterIPChangedInPlace(t *testing.T) {
	// An informer that missed the delete sees the recreate as an update.
	f := newFixture(t, fixtureOpts{objects: []runtime.Object{
		serviceCIDR("kubernetes", "10.96.0.0/16"),
		svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080)),
	}})
	f.updateService(svc("ns", "web", []string{"10.96.0.31"}, tcp("http", 80, i8080)))
	f.expect("10.96.0.31:80", known("ns", "web", "10.96.0.31", 80, "http", i8080))
	f.expect("10.96.0.10:80", noService)
}

func TestPortRemovedAndAdded(t *testing.T) {
	f := newFixture(t, fixtureOpts{objects: []runtime.Object{
		serviceCIDR("kubernetes", "10.96.0.0/16"),
		svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080), tcp("https", 443, sHTTP)),
	}})
	f.expect("10.96.0.10:443", known("ns", "web", "10.96.0.10", 443, "https", sHTTP))
	f.updateService(svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080)))
	f.expect("10.96.0.10:443", portNotDeclared("ns", "web"))
	f.expect("10.96.0.10:80", known("ns", "web", "10.96.0.10", 80, "http", i8080))
	// A port that turns UDP is no TCP port any more.
	udp := tcp("http", 80, i8080)
	udp.Protocol = corev1.ProtocolUDP
	f.updateService(svc("ns", "web", []string{"10.96.0.10"}, udp))
	f.expect("10.96.0.10:80", portNotDeclared("ns", "web"))
	if ps := f.x.ServicePorts(); len(ps) != 0 {
		t.Errorf("ServicePorts() = %v, want none", ps)
	}
}

func TestServiceBecomesHeadlessOrExternalName(t *testing.T) {
	f := newFixture(t, fixtureOpts{objects: []runtime.Object{
		serviceCIDR("kubernetes", "10.96.0.0/16"),
		svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080)),
	}})
	s := svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080))
	s.Spec.Type = corev1.ServiceTypeExternalName
	f.updateService(s)
	f.expect("10.96.0.10:80", noService)
	f.updateService(svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080)))
	f.expect("10.96.0.10:80", known("ns", "web", "10.96.0.10", 80, "http", i8080))
}

func TestServiceCIDRAddedAndRemovedAtRuntime(t *testing.T) {
	f := newFixture(t, fixtureOpts{objects: []runtime.Object{
		serviceCIDR("kubernetes", "10.96.0.0/16"),
		svc("ns", "late", []string{"10.97.0.5"}, tcp("http", 80, i8080)),
	}})
	f.expect("10.97.0.5:80", external)
	f.expect("10.97.0.6:80", external)

	f.create(serviceCIDR("extra", "10.97.0.0/16"))
	f.expect("10.97.0.5:80", known("ns", "late", "10.97.0.5", 80, "http", i8080))
	f.expect("10.97.0.6:80", noService)
	// 10.96.0.0/16 and 10.97.0.0/16 are adjacent and aligned: one /15.
	if ps, ok := f.x.Range(); !ok || !slices.Equal(ps, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/15")}) {
		t.Errorf("Range() = %v, %v; want [10.96.0.0/15], true", ps, ok)
	}
	if n := len(f.x.ServicePorts()); n != 1 {
		t.Errorf("ServicePorts() has %d ports, want 1", n)
	}

	if err := f.kube.NetworkingV1().ServiceCIDRs().Delete(f.ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("10.97.0.5:80", external)
}

func TestRangeUnknown(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		objects:   []runtime.Object{svc("ns", "web", []string{"10.96.0.10"}, tcp("http", 80, i8080))},
		imports:   []runtime.Object{serviceImport("ns", "imp", "ClusterSetIP", nil, "10.200.0.1")},
		crdServed: true,
	})
	if ps, ok := f.x.Range(); ok || len(ps) != 0 {
		t.Errorf("Range() = %v, %v; want none, false", ps, ok)
	}
	f.expect("10.96.0.10:80", external)
	f.expect("10.200.0.1:80", external)
	if ps := f.x.ServicePorts(); len(ps) != 0 {
		t.Errorf("ServicePorts() = %v, want none while the range is unknown", ps)
	}
	// An IPv6-only ServiceCIDR does not make the IPv4 range known either.
	f.create(serviceCIDR("v6", "fd00::/112"))
	f.create(serviceCIDR("kubernetes", "10.96.0.0/16"))
	f.expect("10.96.0.10:80", known("ns", "web", "10.96.0.10", 80, "http", i8080))
	f.expect("10.200.0.1:80", noService) // the import's /32 joins a known range
}

func TestRangeOverride(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		opts: Options{RangeOverride: []netip.Prefix{netip.MustParsePrefix("10.100.0.0/24"), netip.MustParsePrefix("fd00::/64"), netip.MustParsePrefix("10.100.1.7/24")}},
		objects: []runtime.Object{
			serviceCIDR("kubernetes", "10.96.0.0/16"),
			svc("ns", "in-cidr", []string{"10.96.0.10"}, tcp("http", 80, i8080)),
			svc("ns", "in-override", []string{"10.100.0.5"}, tcp("http", 80, i8080)),
		},
		imports:   []runtime.Object{serviceImport("ns", "imp", "ClusterSetIP", nil, "10.200.0.1")},
		crdServed: true,
	})
	f.expect("10.100.0.5:80", known("ns", "in-override", "10.100.0.5", 80, "http", i8080))
	f.expect("10.96.0.10:80", external) // the override replaces the ServiceCIDRs
	f.expect("10.100.1.200:80", noService)
	f.expect("10.200.0.1:80", noService) // ...but not the ServiceImports
	ps, ok := f.x.Range()
	want := []netip.Prefix{netip.MustParsePrefix("10.100.0.0/23"), netip.MustParsePrefix("10.200.0.1/32")}
	if !ok || !slices.Equal(ps, want) {
		t.Errorf("Range() = %v, %v; want %v, true", ps, ok, want)
	}
	// ServiceCIDRs are not even watched.
	f.create(serviceCIDR("extra", "10.97.0.0/16"))
	f.create(svc("ns", "probe", []string{"10.100.0.6"}, tcp("http", 80, i8080)))
	f.expect("10.100.0.6:80", known("ns", "probe", "10.100.0.6", 80, "http", i8080))
	if ps2, _ := f.x.Range(); !slices.Equal(ps2, want) {
		t.Errorf("Range() after a new ServiceCIDR = %v, want %v", ps2, want)
	}
}

func TestRangeOverrideInvalid(t *testing.T) {
	for _, o := range [][]netip.Prefix{
		{{}},
		{netip.MustParsePrefix("fd00::/64")},
	} {
		if _, err := New(nil, nil, nil, Options{RangeOverride: o}); err == nil {
			t.Errorf("New(nil factory) succeeded")
		}
		f := fixtureFactory()
		if _, err := New(f, nil, nil, Options{RangeOverride: o}); err == nil {
			t.Errorf("New(override %v) succeeded, want an error", o)
		} else {
			t.Logf("override %v: %v", o, err)
		}
	}
}

func TestServiceImports(t *testing.T) {
	managed := map[string]string{ManagedImportLabel: "true"}
	f := newFixture(t, fixtureOpts{
		objects: []runtime.Object{serviceCIDR("kubernetes", "10.96.0.0/16")},
		imports: []runtime.Object{
			serviceImport("ns", "outside", "ClusterSetIP", nil, "10.200.0.1", "fd00::1", "bogus"),
			serviceImport("ns", "inside", "ClusterSetIP", nil, "10.96.7.7"),
			serviceImport("ns", "managed", "ClusterSetIP", managed, "10.200.0.2"),
			serviceImport("ns", "headless", "Headless", nil, "10.200.0.3"),
		},
		crdServed: true,
	})
	f.expect("10.200.0.1:80", noService)
	f.expect("10.200.0.2:80", external)
	f.expect("10.200.0.3:80", external)
	ps, ok := f.x.Range()
	want := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("10.200.0.1/32")}
	if !ok || !slices.Equal(ps, want) {
		t.Errorf("Range() = %v, %v; want %v, true", ps, ok, want)
	}

	// A new import, then the label that hands it to the mesh.
	imp := serviceImport("ns", "later", "ClusterSetIP", nil, "10.201.0.9")
	f.create(imp)
	f.expect("10.201.0.9:443", noService)
	imp.SetLabels(managed)
	if _, err := f.dyn.Resource(serviceImportGVR).Namespace("ns").Update(f.ctx, imp, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("10.201.0.9:443", external)
	if err := f.dyn.Resource(serviceImportGVR).Namespace("ns").Delete(f.ctx, "outside", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("10.200.0.1:80", external)
}

func TestServiceImportCRDAbsentThenInstalledThenRemoved(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		objects: []runtime.Object{serviceCIDR("kubernetes", "10.96.0.0/16")},
		imports: []runtime.Object{serviceImport("ns", "imp", "ClusterSetIP", nil, "10.200.0.1")},
	})
	// Absent CRD: synced, range = ServiceCIDRs only.
	if ps, ok := f.x.Range(); !ok || !slices.Equal(ps, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}) {
		t.Errorf("Range() = %v, %v", ps, ok)
	}
	f.expect("10.200.0.1:80", external)

	f.disco.setServed(true)
	f.expect("10.200.0.1:80", noService)
	f.disco.setServed(false)
	f.expect("10.200.0.1:80", external)
}

func TestNoDynamicClient(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		objects:   []runtime.Object{serviceCIDR("kubernetes", "10.96.0.0/16")},
		imports:   []runtime.Object{serviceImport("ns", "imp", "ClusterSetIP", nil, "10.200.0.1")},
		crdServed: true,
		noDynamic: true,
	})
	f.expect("10.96.1.1:80", noService)
	f.expect("10.200.0.1:80", external)
}
