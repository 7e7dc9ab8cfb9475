package kubeproxyguard

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/google/nftables"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
)

// TestGuardWithAPIServer runs what the DaemonSet runs (WatchServices feeding
// a Guard) against a real kube-apiserver: labelling a Service deletes its
// kube-proxy objects, removing the label stops guarding it, labelling a
// Service later guards it too.
func TestGuardWithAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	e := startAPIServerEnv(t)
	ns, kube, c, create := e.ns, e.kube, e.conn, e.create
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	chosen := map[string]string{Label: LabelValue}
	create("default", "demo", chosen)
	create("default", "sticky", chosen)
	create("default", "empty", nil)
	create("other", "demo", nil)

	g := startGuard(t, ns, time.Hour)
	watched := make(chan error, 1)
	go func() { watched <- WatchServices(ctx, kube, g) }()
	defer func() {
		cancel()
		if err := <-watched; err != nil {
			t.Errorf("WatchServices: %v", err)
		}
	}()

	demo, sticky, empty, otherDemo := svc("default/demo"), svc("default/sticky"), svc("default/empty"), svc("other/demo")
	all := []types.NamespacedName{demo, sticky, empty, otherDemo}
	expectPresent := func(what string, want ...types.NamespacedName) {
		t.Helper()
		slices.SortFunc(want, func(a, b types.NamespacedName) int { return cmpName(a, b) })
		var got []types.NamespacedName
		if _, ok := waitFor(10*time.Second, func() bool {
			got = onPath(t, c, all)
			slices.SortFunc(got, func(a, b types.NamespacedName) int { return cmpName(a, b) })
			return slices.Equal(got, want)
		}); !ok {
			t.Fatalf("%s: Services in the table %v, want %v", what, got, want)
		}
	}
	expectPresent("labelled demo and sticky", empty, otherDemo)

	// The label goes: demo is no longer guarded, kube-proxy's restore stays.
	svcs := kube.CoreV1().Services("default")
	s, err := svcs.Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(s.Labels, Label)
	if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitFor(10*time.Second, func() bool { return len(g.Status().Services) == 1 }); !ok {
		t.Fatalf("label removal not seen: %+v", g.Status().Services)
	}
	settle(t, g)
	load(t, ns, "kube-proxy-v1.34-restore.nft")
	expectPresent("after the restore", demo, empty, otherDemo)

	// A Service labelled later is guarded too.
	if _, err := svcs.Patch(ctx, "empty", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+Label+`":"`+LabelValue+`"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expectPresent("empty labelled", demo, otherDemo)
}

func cmpName(a, b types.NamespacedName) int {
	switch {
	case a.String() < b.String():
		return -1
	case a.String() > b.String():
		return 1
	}
	return 0
}

// apiServerEnv is where both API-server tests start: a netns holding
// kube-proxy's v1.34 ruleset, a real kube-apiserver, and create, which makes
// a one-port Service there.
type apiServerEnv struct {
	ns     *netnstest.NS
	kube   kubernetes.Interface
	ctx    context.Context
	conn   *nftables.Conn
	create func(namespace, name string, lbls map[string]string)
}

func startAPIServerEnv(t *testing.T) apiServerEnv {
	t.Helper()
	ns := netnstest.New(t) // skips when not root, before starting anything
	kube := kubernetes.NewForConfigOrDie(testenv.Start(t, testenv.Options{}))
	ctx := t.Context()
	load(t, ns, "kube-proxy-v1.34.nft")
	create := func(namespace, name string, lbls map[string]string) {
		t.Helper()
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: lbls},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		}
		if _, err := kube.CoreV1().Services(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return apiServerEnv{ns: ns, kube: kube, ctx: ctx, conn: conn(t, ns), create: create}
}
