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

	"github.com/aether-mesh/svclb/internal/nsselector"
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
	// No agent ConfigMap: the agent's default selector.
	go func() { done <- WatchServicesByNamespace(ctx, client, NamespaceSelection{}, r) }()
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

// TestGuardWithAPIServerNamespaceMode runs what the DaemonSet runs with
// --namespace-selector (WatchServicesByNamespace feeding a Guard) against a real
// kube-apiserver: every Service of an enrolled namespace is cut without the label, the
// labelled ones elsewhere too, default/kubernetes never, not even once default is enrolled;
// a namespace that stops matching is no longer guarded.
func TestGuardWithAPIServerNamespaceMode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	e := startAPIServerEnv(t)
	ns, kube, c, create := e.ns, e.kube, e.conn, e.create
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	enrolled := map[string]string{contract.MeshLabel: contract.MeshEnabled}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, namespace("other", enrolled), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create("other", "demo", nil)                                    // enrolled namespace, no label
	create("default", "demo", map[string]string{Label: LabelValue}) // labelled, namespace not enrolled
	create("default", "sticky", nil)
	create("default", "local", nil)
	// The apiserver makes its own Service; wait for it, so it is in the set the watcher sees.
	if _, ok := waitFor(30*time.Second, func() bool {
		_, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil
	}); !ok {
		t.Fatal("kube-apiserver made no default/kubernetes Service in 30s")
	}

	g := startGuard(t, ns, time.Hour)
	watched := make(chan error, 1)
	go func() { watched <- WatchServicesByNamespace(ctx, kube, NamespaceSelection{}, g) }()
	defer func() {
		cancel()
		if err := <-watched; err != nil {
			t.Errorf("WatchServicesByNamespace: %v", err)
		}
	}()

	otherDemo, demo, sticky, local, api := svc("other/demo"), svc("default/demo"), svc("default/sticky"), svc("default/local"), contract.APIServerService
	all := []types.NamespacedName{otherDemo, demo, sticky, local, api}
	expectPresent := func(what string, want ...types.NamespacedName) {
		t.Helper()
		slices.SortFunc(want, cmpName)
		var got []types.NamespacedName
		if _, ok := waitFor(10*time.Second, func() bool {
			got = onPath(t, c, all)
			slices.SortFunc(got, cmpName)
			return slices.Equal(got, want)
		}); !ok {
			t.Fatalf("%s: Services in the table %v, want %v", what, got, want)
		}
	}
	expectPresent("other enrolled", sticky, local, api)

	// default enrolled: its Services are cut in the same pass, the apiserver's is never chosen.
	if _, err := kube.CoreV1().Namespaces().Update(ctx, namespace("default", enrolled), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectPresent("default enrolled", api)
	settle(t, g)
	if got := onPath(t, c, []types.NamespacedName{api}); len(got) != 1 {
		t.Errorf("default/kubernetes cut once default was enrolled")
	}
	for _, s := range g.Status().Services {
		if s.Namespace == api.Namespace && s.Name == api.Name {
			t.Errorf("the guard guards default/kubernetes: %+v", s)
		}
	}

	// default stops matching: sticky and local are no longer guarded, kube-proxy's restore
	// stays; the labelled demo is cut again.
	if _, err := kube.CoreV1().Namespaces().Update(ctx, namespace("default", nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitFor(10*time.Second, func() bool { return len(g.Status().Services) == 2 }); !ok {
		t.Fatalf("default un-enrolled not seen: %+v", g.Status().Services)
	}
	settle(t, g)
	load(t, ns, "kube-proxy-v1.34-restore.nft")
	expectPresent("after the restore", sticky, local, api)
}

func TestChosen(t *testing.T) {
	enrolled := map[string]string{contract.MeshLabel: contract.MeshEnabled}
	sel, err := labels.Parse(contract.DefaultNamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	labelled := map[string]string{Label: LabelValue}
	for _, tc := range []struct {
		name     string
		svc      *corev1.Service
		nsLabels map[string]string
		sel      labels.Selector
		want     bool
	}{
		{"labelled, label mode", service("a", "s", labelled), nil, nil, true},
		{"plain, label mode, enrolled namespace", service("a", "s", nil), enrolled, nil, false},
		{"plain, enrolled namespace", service("a", "s", nil), enrolled, sel, true},
		{"plain, other namespace", service("a", "s", nil), map[string]string{contract.MeshLabel: contract.MeshDisabled}, sel, false},
		{"apiserver, enrolled namespace", service("default", "kubernetes", nil), enrolled, sel, false},
		{"apiserver labelled (the Guard refuses it)", service("default", "kubernetes", labelled), nil, sel, true},
	} {
		if got := Chosen(tc.svc, tc.nsLabels, tc.sel); got != tc.want {
			t.Errorf("%s: Chosen %v, want %v", tc.name, got, tc.want)
		}
	}
}

// agentConfigMap is the agent's ConfigMap with data (nil: no data at all).
func agentConfigMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: contract.Namespace, Name: contract.AgentConfigMap}, Data: data}
}

// TestWatchServicesByNamespaceOverride: --namespace-selector decides, whatever the agent's
// ConfigMap says; /status shows both, the agent's as the agent reads it.
func TestWatchServicesByNamespaceOverride(t *testing.T) {
	client := fake.NewClientset(
		namespace("a", map[string]string{"team": "a"}), namespace("b", map[string]string{"team": "b"}),
		service("a", "web", nil), service("b", "web", nil),
		agentConfigMap(map[string]string{contract.KeyNamespaceSelector: "team=b"}),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	over, err := nsselector.Parse("team=a")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	done := make(chan error, 1)
	go func() { done <- WatchServicesByNamespace(ctx, client, NamespaceSelection{Override: &over}, r) }()
	if _, ok := waitFor(5*time.Second, func() bool { return slices.Equal(r.get(), []types.NamespacedName{svc("a/web")}) }); !ok {
		t.Fatalf("chosen %v, want a/web (the override's)", r.get())
	}
	if got, want := r.selector(), (NamespaceSelectorStatus{Source: SourceFlag, Selector: "team=a", AgentSelector: "team=b"}); got != want {
		t.Errorf("selector status %+v, want %+v", got, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestGuardFollowsAgentSelector runs what the DaemonSet runs (WatchServicesByNamespace
// feeding a Guard, no override) against a real kube-apiserver, in a netns holding kube-proxy's
// v1.34 ruleset, while the agent's ConfigMap changes: the cut set follows its selector, with
// the agent's reading of every value (internal/nsselector, the agent's own parser). A
// namespace that leaves the selector has its Services' cuts put back at once; "" selects
// every namespace (never default/kubernetes); a bad value keeps the last good selector and is
// reported in /status; the key or the ConfigMap gone is the agent's default selector.
func TestGuardFollowsAgentSelector(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	e := startAPIServerEnv(t)
	ns, kube, c, create := e.ns, e.kube, e.conn, e.create
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	for _, n := range []*corev1.Namespace{namespace("other", map[string]string{"team": "a"}), namespace(contract.Namespace, nil)} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("other", "demo", nil)
	create("default", "demo", nil)
	create("default", "sticky", nil)
	if _, ok := waitFor(30*time.Second, func() bool {
		_, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil
	}); !ok {
		t.Fatal("kube-apiserver made no default/kubernetes Service in 30s")
	}
	cms := kube.CoreV1().ConfigMaps(contract.Namespace)
	if _, err := cms.Create(ctx, agentConfigMap(map[string]string{contract.KeyNamespaceSelector: "team=a", contract.KeyPhase1: "true"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setSelector := func(v *string) {
		t.Helper()
		cm, err := cms.Get(ctx, contract.AgentConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v == nil {
			delete(cm.Data, contract.KeyNamespaceSelector)
		} else {
			cm.Data[contract.KeyNamespaceSelector] = *v
		}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	g := startGuard(t, ns, time.Hour)
	watched := make(chan error, 1)
	go func() { watched <- WatchServicesByNamespace(ctx, kube, NamespaceSelection{}, g) }()
	defer func() {
		cancel()
		if err := <-watched; err != nil {
			t.Errorf("WatchServicesByNamespace: %v", err)
		}
	}()

	otherDemo, demo, sticky, api := svc("other/demo"), svc("default/demo"), svc("default/sticky"), contract.APIServerService
	all := []types.NamespacedName{otherDemo, demo, sticky, api}
	expect := func(what string, sel NamespaceSelectorStatus, onPathWant ...types.NamespacedName) {
		t.Helper()
		slices.SortFunc(onPathWant, cmpName)
		var got []types.NamespacedName
		var st *NamespaceSelectorStatus
		if _, ok := waitFor(10*time.Second, func() bool {
			st = g.Status().NamespaceSelector
			got = onPath(t, c, all)
			slices.SortFunc(got, cmpName)
			return st != nil && st.Selector == sel.Selector && sameRefusal(st.Refused, sel.Refused) && slices.Equal(got, onPathWant)
		}); !ok {
			var refused *RefusedValue
			if st != nil {
				refused = st.Refused
			}
			t.Fatalf("%s: selector %+v (refused %+v), on kube-proxy's path %v; want %+v (refused %+v), %v", what, st, refused, got, sel, sel.Refused, onPathWant)
		}
		if st.Source != SourceAgentConfigMap || st.AgentSelector != st.Selector {
			t.Errorf("%s: selector status %+v: want the agent's ConfigMap's", what, st)
		}
	}
	str := func(s string) *string { return &s }
	expect("team=a", NamespaceSelectorStatus{Selector: "team=a"}, demo, sticky, api)

	// default joins, other leaves: other/demo is put back by the guard, not by a kube-proxy sync.
	if _, err := kube.CoreV1().Namespaces().Update(ctx, namespace("default", map[string]string{"team": "b"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setSelector(str("team=b"))
	expect("team=b", NamespaceSelectorStatus{Selector: "team=b"}, otherDemo, api)

	setSelector(str(""))
	expect(`"" (every namespace, as to the agent)`, NamespaceSelectorStatus{Selector: ""}, api)

	setSelector(str("team in (a"))
	bad := &RefusedValue{Value: `"team in (a"`, Kept: ""}
	// The reason is labels.Parse's, as the agent reports it.
	_, perr := nsselector.Parse("team in (a")
	bad.Reason = perr.Error()
	expect("a bad value keeps the last good one", NamespaceSelectorStatus{Selector: "", Refused: bad}, api)
	settle(t, g)
	if got := onPath(t, c, all); !slices.Equal(got, []types.NamespacedName{api}) {
		t.Errorf("after the bad value: on kube-proxy's path %v, want only %v", got, api)
	}

	setSelector(nil)
	expect("key removed: the agent's default", NamespaceSelectorStatus{Selector: contract.DefaultNamespaceSelector}, otherDemo, demo, sticky, api)

	if _, err := kube.CoreV1().Namespaces().Update(ctx, namespace("other", map[string]string{contract.MeshLabel: contract.MeshEnabled}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setSelector(str("team=b"))
	expect("team=b again", NamespaceSelectorStatus{Selector: "team=b"}, otherDemo, api)
	if err := cms.Delete(ctx, contract.AgentConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("ConfigMap deleted: the agent's default", NamespaceSelectorStatus{Selector: contract.DefaultNamespaceSelector}, demo, sticky, api)
}
