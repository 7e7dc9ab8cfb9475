package kubeproxyguard

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

type recorder struct {
	mu   sync.Mutex
	last []types.NamespacedName
	n    int
	sel  NamespaceSelectorStatus
}

func (r *recorder) SetNamespaceSelector(st NamespaceSelectorStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sel = st
}

func (r *recorder) selector() NamespaceSelectorStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sel
}

func (r *recorder) SetServices(s []types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.n = s, r.n+1
}

func (r *recorder) get() []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func service(ns, name string, lbls map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
}

func TestWatchServices(t *testing.T) {
	chosen := map[string]string{Label: LabelValue}
	client := fake.NewClientset(
		service("default", "demo", chosen),
		service("default", "other", nil),
		service("other", "demo", map[string]string{Label: "kept"}),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &recorder{}
	done := make(chan error, 1)
	go func() { done <- WatchServices(ctx, client, r) }()

	expect := func(what string, want ...types.NamespacedName) {
		t.Helper()
		if _, ok := waitFor(5*time.Second, func() bool { return slices.Equal(r.get(), want) }); !ok {
			t.Fatalf("%s: chosen %v, want %v", what, r.get(), want)
		}
	}
	expect("start", svc("default/demo"))

	svcs := client.CoreV1().Services("default")
	if _, err := svcs.Create(ctx, service("default", "late", chosen), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("labelled Service created", svc("default/demo"), svc("default/late"))

	if _, err := svcs.Update(ctx, service("default", "demo", nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("label removed", svc("default/late"))

	if err := svcs.Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("Service deleted")

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("WatchServices: %v", err)
	}
}
