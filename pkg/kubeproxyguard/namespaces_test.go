package kubeproxyguard

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/aether-mesh/svclb/pkg/contract"
)

func namespace(name string, lbls map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

// TestWatchServicesByNamespace: every Service of an enrolled namespace is chosen, with the
// labelled ones elsewhere; default/kubernetes never, even when default is enrolled.
func TestWatchServicesByNamespace(t *testing.T) {
	enrolled := map[string]string{contract.MeshLabel: contract.MeshEnabled}
	client := fake.NewClientset(
		namespace("shop", enrolled), namespace("default", nil), namespace("other", nil),
		service("shop", "cart", nil),
		service("other", "labelled", map[string]string{Label: LabelValue}),
		service("other", "plain", nil),
		service("default", "kubernetes", nil),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &recorder{}
	done := make(chan error, 1)
	sel, err := labels.Parse(contract.DefaultNamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- WatchServicesByNamespace(ctx, client, sel, r) }()
	expect := func(what string, want ...types.NamespacedName) {
		t.Helper()
		if _, ok := waitFor(5*time.Second, func() bool { return slices.Equal(r.get(), want) }); !ok {
			t.Fatalf("%s: chosen %v, want %v", what, r.get(), want)
		}
	}
	expect("start", svc("other/labelled"), svc("shop/cart"))

	if _, err := client.CoreV1().Services("shop").Create(ctx, service("shop", "pay", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("Service created in an enrolled namespace", svc("other/labelled"), svc("shop/cart"), svc("shop/pay"))

	if _, err := client.CoreV1().Namespaces().Update(ctx, namespace("default", enrolled), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, service("default", "web", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("default enrolled: its Services but not kubernetes",
		svc("default/web"), svc("other/labelled"), svc("shop/cart"), svc("shop/pay"))

	if _, err := client.CoreV1().Namespaces().Update(ctx, namespace("shop", nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("shop un-enrolled", svc("default/web"), svc("other/labelled"))

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("WatchServicesByNamespace: %v", err)
	}
}
