package uninstall

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// events is what happened, in order: the clientset's writes and the node commands.
type events struct {
	mu  sync.Mutex
	all []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, s)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.all)
}

// index is the position of the first event with prefix, -1 when none.
func (e *events) index(prefix string) int {
	return slices.IndexFunc(e.list(), func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// last is the position of the last event with prefix, -1 when none.
func (e *events) last(prefix string) int {
	l := e.list()
	for i := len(l) - 1; i >= 0; i-- {
		if strings.HasPrefix(l[i], prefix) {
			return i
		}
	}
	return -1
}

// daemonSetCluster is a fake cluster of nodes a and b, in daemonset mode, that a run left
// (the guard's DaemonSet and namespace svclb-system): the clientset's writes are recorded in
// ev, and a node-access DaemonSet once applied reads as rolled out on both nodes.
func daemonSetCluster(t *testing.T, ev *events, objs ...runtime.Object) (*fake.Clientset, *cluster.Cluster) {
	t.Helper()
	objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: contract.Namespace}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: contract.GuardName, Namespace: contract.Namespace}})
	cs := fake.NewClientset(objs...)
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var name string
		switch a := a.(type) {
		case k8stesting.PatchAction:
			name = a.GetName()
		case k8stesting.DeleteAction:
			name = a.GetName()
		default:
			return false, nil, nil
		}
		ev.add(a.GetVerb() + " " + a.GetResource().Resource + " " + name)
		return false, nil, nil
	})
	dsr := appsv1.SchemeGroupVersion.WithResource("daemonsets")
	cs.PrependReactor("get", "daemonsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		g := a.(k8stesting.GetAction)
		o, err := cs.Tracker().Get(dsr, g.GetNamespace(), g.GetName())
		if err != nil {
			return true, nil, err
		}
		ds := o.(*appsv1.DaemonSet).DeepCopy()
		if ds.Name == contract.NodeAccessName {
			ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberReady: 2}
		}
		return true, ds, nil
	})
	return cs, &cluster.Cluster{CS: cs, Access: cluster.NodeAccessDaemonSet}
}

// TestUninstallDaemonSet: in daemonset mode the uninstaller deploys the node-access
// DaemonSet, waits for it, has every node answer through it, removes the rest, puts every
// node back and verifies it, and only then deletes the DaemonSet and its namespace, which are
// gone at the end.
func TestUninstallDaemonSet(t *testing.T) {
	ev := &events{}
	cs, c := daemonSetCluster(t, ev)
	nodes := &fakeNodes{ruleset: map[string]string{"a": nft(t, "clean"), "b": nft(t, "clean")},
		files: map[string]map[string]bool{"a": {}, "b": {}}, events: ev}
	u := &Uninstaller{Cluster: c, Nodes: nodes, Log: io.Discard, Poll: 10 * time.Millisecond, Timeout: 5 * time.Second}
	if err := u.Uninstall(context.Background()); err != nil {
		t.Fatal(err)
	}
	order := []string{
		"patch daemonsets " + contract.NodeAccessName,  // deploy
		"exec a: uname -n",                             // every node answers through it
		"exec b: uname -n",                             //
		"delete daemonsets " + contract.GuardName,      // the rest removed
		"exec a: nft list ruleset",                     // put back
		"exec b: test ! -e",                            // verified
		"delete daemonsets " + contract.NodeAccessName, // deleted last
		"delete namespaces " + contract.Namespace,      // with its namespace
	}
	at := -1
	for _, e := range order {
		i := ev.index(e)
		if i <= at {
			t.Fatalf("%q at %d, after %d: want the order %q; events:\n%s", e, i, at, order, strings.Join(ev.list(), "\n"))
		}
		at = i
	}
	if i, last := ev.index("delete daemonsets "+contract.NodeAccessName), ev.last("exec "); i < last {
		t.Errorf("node-access DaemonSet deleted at %d, a node read at %d: want it deleted after the last", i, last)
	}
	if _, err := cs.AppsV1().DaemonSets(contract.Namespace).Get(context.Background(), contract.NodeAccessName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node-access DaemonSet left: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), contract.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s left: %v", contract.Namespace, err)
	}
}

// TestUninstallDaemonSetVerifyFails: a node that does not verify (no kube-proxy table) fails
// the uninstall naming it, and the node-access DaemonSet is deleted all the same, after the
// failed verification.
func TestUninstallDaemonSetVerifyFails(t *testing.T) {
	ev := &events{}
	cs, c := daemonSetCluster(t, ev)
	nodes := &fakeNodes{ruleset: map[string]string{"a": nft(t, "clean"), "b": nft(t, "no-kube-proxy")},
		files: map[string]map[string]bool{"a": {}, "b": {}}, events: ev}
	u := &Uninstaller{Cluster: c, Nodes: nodes, Log: io.Discard, Poll: 10 * time.Millisecond, Timeout: 300 * time.Millisecond}
	err := u.Uninstall(context.Background())
	if err == nil || !strings.Contains(err.Error(), "node b: not clean") || !strings.Contains(err.Error(), "NO table ip kube-proxy") {
		t.Fatalf("Uninstall = %v, want node b not clean, without kube-proxy's table", err)
	}
	if i, last := ev.index("delete daemonsets "+contract.NodeAccessName), ev.last("exec b: nft list ruleset"); i < 0 || i < last {
		t.Errorf("node-access DaemonSet deleted at %d, node b's last read at %d: want it deleted after the verification; events:\n%s",
			i, last, strings.Join(ev.list(), "\n"))
	}
	if _, err := cs.AppsV1().DaemonSets(contract.Namespace).Get(context.Background(), contract.NodeAccessName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node-access DaemonSet left: %v", err)
	}
}

// TestRestoreGuardKeepsKeptAccess: after a kept run in daemonset mode its node-access
// DaemonSet stays (the restore uses it, updated); a restore that deployed it deletes it.
func TestRestoreGuardKeepsKeptAccess(t *testing.T) {
	for _, kept := range []bool{true, false} {
		ev := &events{}
		var objs []runtime.Object
		if kept {
			objs = append(objs, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: contract.NodeAccessName, Namespace: contract.Namespace}})
		}
		cs, c := daemonSetCluster(t, ev, objs...)
		nodes := &fakeNodes{ruleset: map[string]string{"a": nft(t, "clean"), "b": nft(t, "clean")}, events: ev}
		u := &Uninstaller{Cluster: c, Nodes: nodes, Log: io.Discard, Poll: 10 * time.Millisecond, Timeout: 5 * time.Second}
		if err := u.RestoreGuard(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err := cs.AppsV1().DaemonSets(contract.Namespace).Get(context.Background(), contract.NodeAccessName, metav1.GetOptions{})
		if there := err == nil; there != kept {
			t.Errorf("kept %v: node-access DaemonSet there after the restore: %v (%v)", kept, there, err)
		}
		if ev.index("delete namespaces") >= 0 {
			t.Errorf("kept %v: the restore deleted a namespace: %v", kept, ev.list())
		}
	}
}
