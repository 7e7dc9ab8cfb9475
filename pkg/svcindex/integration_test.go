package svcindex

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/aether-mesh/svclb/internal/testing/testenv"
)

// TestAgainstRealAPIServer proves the informer wiring on a real kube-apiserver:
// the default ServiceCIDR, allocated ClusterIPs, a ServiceCIDR created at
// runtime, and a ServiceImport CRD installed while the index runs.
func TestAgainstRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	cfg := testenv.Start(t, testenv.Options{})
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(kube, 0)
	x, err := New(factory, dyn, kube.Discovery(), Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	x.imports.recheck = 200 * time.Millisecond
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	f := &fixture{t: t, ctx: ctx, x: x}
	f.eventually("HasSynced", x.HasSynced)

	// The apiserver turns --service-cluster-ip-range into ServiceCIDR "kubernetes".
	wantRange := func(want ...string) {
		t.Helper()
		var ps []netip.Prefix
		for _, s := range want {
			ps = append(ps, netip.MustParsePrefix(s))
		}
		f.eventually("Range "+fmtPrefixes(ps), func() bool {
			got, ok := x.Range()
			return ok && slices.Equal(got, ps)
		})
	}
	wantRange(testenv.ServiceClusterIPRange)

	web := svc("default", "web", nil, tcp("http", 80, i8080), corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
	web, err = kube.CoreV1().Services("default").Create(ctx, web, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vip := web.Spec.ClusterIP
	t.Logf("Service default/web got ClusterIP %s", vip)
	f.expect(vip+":80", known("default", "web", vip, 80, "http", i8080))
	f.expect(vip+":53", portNotDeclared("default", "web"))

	// A second ServiceCIDR at runtime: the range grows.
	extra := serviceCIDR("extra", "10.97.0.0/24")
	if _, err := kube.NetworkingV1().ServiceCIDRs().Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantRange("10.96.0.0/16", "10.97.0.0/24")

	// Allocate from it. Its Ready condition is kube-controller-manager's job,
	// which envtest does not run: set it the way that controller does.
	markReady(t, ctx, kube, "extra")
	late := svc("default", "late", []string{"10.97.0.10"}, tcp("http", 8080, i8080))
	if _, err := kube.CoreV1().Services("default").Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Service in the new ServiceCIDR: %v", err)
	}
	f.expect("10.97.0.10:8080", known("default", "late", "10.97.0.10", 8080, "http", i8080))

	if err := kube.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect(vip+":80", noService)

	// The MCS ServiceImport CRD appears while the index runs.
	f.expect("10.200.0.1:80", external)
	installServiceImportCRD(t, ctx, dyn)
	imp := serviceImport("default", "remote", "ClusterSetIP", nil, "10.200.0.1")
	f.eventually("ServiceImport created", func() bool {
		_, err := dyn.Resource(serviceImportGVR).Namespace("default").Create(ctx, imp, metav1.CreateOptions{})
		return err == nil // the CRD's storage may not be ready at once
	})
	f.expect("10.200.0.1:80", noService)
	wantRange("10.96.0.0/16", "10.97.0.0/24", "10.200.0.1/32")
}

func fmtPrefixes(ps []netip.Prefix) string {
	s := "["
	for i, p := range ps {
		if i > 0 {
			s += " "
		}
		s += p.String()
	}
	return s + "]"
}

func markReady(t *testing.T, ctx context.Context, kube kubernetes.Interface, name string) {
	t.Helper()
	sc, err := kube.NetworkingV1().ServiceCIDRs().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Status.Conditions = append(sc.Status.Conditions, metav1.Condition{
		Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
		Reason: "Test", Message: "set by the test in place of kube-controller-manager", LastTransitionTime: metav1.Now(),
	})
	if _, err := kube.NetworkingV1().ServiceCIDRs().UpdateStatus(ctx, sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func installServiceImportCRD(t *testing.T, ctx context.Context, dyn dynamic.Interface) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "serviceimports.multicluster.x-k8s.io"},
		"spec": map[string]any{
			"group": "multicluster.x-k8s.io",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "serviceimports", "singular": "serviceimport", "kind": "ServiceImport", "listKind": "ServiceImportList"},
			"versions": []any{map[string]any{
				"name": "v1alpha1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
					},
				}},
			}},
		},
	}}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(gvr).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("installing the ServiceImport CRD: %v", err)
	}
}
