package svcindex

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// testLogger keeps test output quiet unless -v and a failure want it.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// fixture is an Index fed by client-go fakes, running until the test ends.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	kube  *fake.Clientset
	dyn   *dynamicfake.FakeDynamicClient
	disco *switchDiscovery
	x     *Index
}

type fixtureOpts struct {
	opts      Options
	objects   []runtime.Object // Services, ServiceCIDRs
	imports   []runtime.Object // ServiceImports (unstructured)
	crdServed bool
	noDynamic bool
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	kube := fake.NewClientset(o.objects...)
	f := &fixture{t: t, ctx: ctx, kube: kube}
	f.disco = &switchDiscovery{FakeDiscovery: kube.Discovery().(*fakediscovery.FakeDiscovery)}
	f.disco.setServed(o.crdServed)
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{serviceImportGVR: "ServiceImportList"}, o.imports...)
	watching := make(chan string, 16)
	signalWatches(kube, watching)
	signalWatches(f.dyn, watching)
	factory := informers.NewSharedInformerFactory(kube, 0)
	if o.opts.Logger == nil {
		o.opts.Logger = testLogger(t)
	}
	var err error
	if o.noDynamic {
		f.x, err = New(factory, nil, nil, o.opts)
	} else {
		f.x, err = New(factory, f.dyn, f.disco, o.opts)
	}
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.x.imports.recheck = 20 * time.Millisecond
	done := make(chan struct{})
	go func() { defer close(done); _ = f.x.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	f.eventually("HasSynced", f.x.HasSynced)
	// The fakes' watches ignore resourceVersion: an object written between an
	// informer's list and its watch is lost. Wait until every watch is open.
	want := map[string]bool{"services": true}
	if o.opts.RangeOverride == nil {
		want["servicecidrs"] = true
	}
	if o.crdServed && !o.noDynamic {
		want["serviceimports"] = true
	}
	for len(want) > 0 {
		select {
		case r := <-watching:
			delete(want, r)
		case <-time.After(10 * time.Second):
			t.Fatalf("informers never watched %v", want)
		}
	}
	return f
}

type fakeWithTracker interface {
	PrependWatchReactor(resource string, reaction k8stesting.WatchReactionFunc)
	Tracker() k8stesting.ObjectTracker
}

// signalWatches makes a fake open its watches itself, then say so on started.
func signalWatches(c fakeWithTracker, started chan<- string) {
	c.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := c.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		select {
		case started <- a.GetResource().Resource:
		default:
		}
		return true, w, nil
	})
}

// eventually waits for cond, waking on every index change and every 10 ms.
func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-f.x.Changed():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// expect waits until Lookup(dst) has the wanted class (and Service), then
// checks the whole result.
func (f *fixture) expect(dst string, want Result) {
	f.t.Helper()
	ap := netip.MustParseAddrPort(dst)
	var got Result
	f.eventually(dst+" is "+want.Class.String(), func() bool {
		got = f.x.Lookup(ap)
		return got == want
	})
}

func (f *fixture) create(obj runtime.Object) {
	f.t.Helper()
	var err error
	switch o := obj.(type) {
	case *corev1.Service:
		_, err = f.kube.CoreV1().Services(o.Namespace).Create(f.ctx, o, metav1.CreateOptions{})
	case *networkingv1.ServiceCIDR:
		_, err = f.kube.NetworkingV1().ServiceCIDRs().Create(f.ctx, o, metav1.CreateOptions{})
	case *unstructured.Unstructured:
		_, err = f.dyn.Resource(serviceImportGVR).Namespace(o.GetNamespace()).Create(f.ctx, o, metav1.CreateOptions{})
	default:
		f.t.Fatalf("create: unexpected %T", obj)
	}
	if err != nil {
		f.t.Fatalf("create: %v", err)
	}
}

func (f *fixture) updateService(svc *corev1.Service) {
	f.t.Helper()
	if _, err := f.kube.CoreV1().Services(svc.Namespace).Update(f.ctx, svc, metav1.UpdateOptions{}); err != nil {
		f.t.Fatalf("update: %v", err)
	}
}

func (f *fixture) deleteService(ns, name string) {
	f.t.Helper()
	if err := f.kube.CoreV1().Services(ns).Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatalf("delete: %v", err)
	}
}

// switchDiscovery is the fake discovery with a ServiceImport CRD that tests
// can install and remove while the index runs.
type switchDiscovery struct {
	*fakediscovery.FakeDiscovery
	mu     sync.Mutex
	served bool
}

func (d *switchDiscovery) setServed(v bool) {
	d.mu.Lock()
	d.served = v
	d.mu.Unlock()
}

func (d *switchDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	served := d.served
	d.mu.Unlock()
	if served && gv == serviceImportGVR.GroupVersion().String() {
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{
			{Name: "serviceimports", Namespaced: true, Kind: "ServiceImport"},
		}}, nil
	}
	return d.FakeDiscovery.ServerResourcesForGroupVersion(gv) // 404 for the MCS group
}

// --- object builders ---

func tcp(name string, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: target}
}

func svc(ns, name string, ips []string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			Selector:   map[string]string{"app": name},
			ClusterIPs: ips,
			Ports:      ports,
		},
	}
	if len(ips) > 0 {
		s.Spec.ClusterIP = ips[0]
	}
	return s
}

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func serviceImport(ns, name, typ string, labels map[string]string, ips ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha1",
		"kind":       "ServiceImport",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       map[string]any{"type": typ, "ports": []any{map[string]any{"port": int64(80), "protocol": "TCP"}}},
	}}
	if ips != nil {
		l := make([]any, len(ips))
		for i, s := range ips {
			l[i] = s
		}
		u.Object["spec"].(map[string]any)["ips"] = l
	}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func known(ns, name, ip string, port uint16, portName string, target intstr.IntOrString) Result {
	return Result{Class: Known, Service: nn(ns, name), Port: ServicePort{
		Service: nn(ns, name), ClusterIP: netip.MustParseAddr(ip), Port: port, PortName: portName, TargetPort: target,
	}}
}

func portNotDeclared(ns, name string) Result {
	return Result{Class: PortNotDeclared, Service: nn(ns, name)}
}

var (
	noService = Result{Class: NoService}
	external  = Result{Class: External}
)
