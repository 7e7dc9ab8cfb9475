package enroll

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestLabeler: every Service of an enrolled namespace is cut once, those
// created later too; other namespaces, Services already labelled and
// default/kubernetes are left alone.
func TestLabeler(t *testing.T) {
	ns := func(name string, l map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	svc := func(ns, name string, l map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}}
	}
	cs := fake.NewClientset(
		ns("services-1", map[string]string{"e2e-framework": "services"}),
		ns("other", map[string]string{"e2e-framework": "apps"}),
		ns("default", nil),
		svc("services-1", "a", nil),
		svc("services-1", "labelled", map[string]string{contract.KubeProxyLabel: contract.KubeProxyCut}),
		svc("other", "b", nil),
		svc("default", "kubernetes", nil),
	)
	sel, err := labels.Parse("e2e-framework in (services,traffic-distribution)")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var cut []string
	l := &Labeler{CS: cs, Selector: sel, Log: t.Logf, Cut: func(ctx context.Context, s *corev1.Service) error {
		mu.Lock()
		cut = append(cut, s.Namespace+"/"+s.Name)
		mu.Unlock()
		// What guard.Cut does: label it, so the informer's update is a no-op.
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[contract.KubeProxyLabel] = contract.KubeProxyCut
		_, err := cs.CoreV1().Services(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(cut))
	}
	waitFor(t, func() bool { return slices.Equal(got(), []string{"services-1/a"}) }, got)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns("traffic-distribution-2", map[string]string{"e2e-framework": "traffic-distribution"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services("traffic-distribution-2").Create(ctx, svc("traffic-distribution-2", "c", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return slices.Equal(got(), []string{"services-1/a", "traffic-distribution-2/c"}) }, got)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g := got(); len(g) != 2 {
		t.Errorf("cut %v: a Service cut twice", g)
	}
}

func waitFor(t *testing.T, cond func() bool, got func() []string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("cut %v: %v", got(), err)
	}
}
