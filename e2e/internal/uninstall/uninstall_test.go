package uninstall

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// fakeNodes holds each node's ruleset and files; kube-proxy's restart (the clientset's pod
// delete) writes its table back as kube-proxy does.
type fakeNodes struct {
	mu       sync.Mutex
	ruleset  map[string]string
	files    map[string]map[string]bool
	commands []string
	// events, when set, records each command with the clientset's actions, in order.
	events *events
}

func (f *fakeNodes) NodeExec(_ context.Context, node string, cmd ...string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := strings.Join(cmd, " ")
	f.commands = append(f.commands, node+": "+line)
	if f.events != nil {
		f.events.add("exec " + node + ": " + line)
	}
	switch {
	case line == "uname -n":
		return node + "\n", nil
	case line == "nft list ruleset":
		return f.ruleset[node], nil
	case strings.HasPrefix(line, "nft delete table "):
		name := strings.TrimPrefix(line, "nft delete table ")
		rs := f.ruleset[node]
		if i := strings.Index(rs, "table "+name+" {"); i >= 0 {
			f.ruleset[node] = rs[:i]
		}
		return "", nil
	case cmd[0] == "rm":
		p := cmd[len(cmd)-1]
		if f.files[node][p] {
			delete(f.files[node], p)
			return "removed '" + p + "'\n", nil
		}
		return "", nil
	case cmd[0] == "test":
		if f.files[node][cmd[len(cmd)-1]] {
			return "", os.ErrExist
		}
		return "", nil
	}
	return "", os.ErrInvalid
}

func (f *fakeNodes) set(node, rs string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ruleset[node] = rs
}

func nft(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name+".nft"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUninstall: on a cluster a run left (guard and node DaemonSets, the legs' namespace),
// a node with cuts and the guard's table, and one with the installer's files left, Uninstall
// deletes the objects, the table and the files, restarts only the cut node's kube-proxy,
// and verifies both nodes clean.
func TestUninstall(t *testing.T) {
	ns := func(n string) *corev1.Namespace { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}} }
	node := func(n string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}} }
	kp := func(name, node, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID(uid), Labels: map[string]string{"k8s-app": "kube-proxy"}},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	cs := fake.NewClientset(ns(contract.Namespace), ns("svclb-e2e"), node("cut"), node("files"),
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: contract.GuardName, Namespace: contract.Namespace}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: contract.NodeDaemonSet, Namespace: contract.Namespace}},
		kp("kube-proxy-a", "cut", "a1"), kp("kube-proxy-b", "files", "b1"))
	nodes := &fakeNodes{
		ruleset: map[string]string{"cut": nft(t, "cut"), "files": nft(t, "clean")},
		files:   map[string]map[string]bool{"cut": {}, "files": {"/etc/cni/net.d/00-svclb.conflist": true, "/opt/cni/bin/svclb-cni": true}},
	}
	var restarted []string
	cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		restarted = append(restarted, name)
		p, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "kube-system", name)
		if err != nil {
			return true, nil, err
		}
		old := p.(*corev1.Pod)
		_ = cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "kube-system", name)
		_ = cs.Tracker().Add(kp(name+"-new", old.Spec.NodeName, string(old.UID)+"-new"))
		nodes.set(old.Spec.NodeName, strings.Split(nft(t, "clean"), "table ip svclb-guard")[0])
		return true, nil, nil
	})
	u := &Uninstaller{Cluster: &cluster.Cluster{CS: cs}, Nodes: nodes, Log: io.Discard, Poll: 10 * time.Millisecond, Timeout: 5 * time.Second,
		Namespaces: WorkloadNamespaces}
	if err := u.Uninstall(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(restarted, []string{"kube-proxy-a"}) {
		t.Errorf("kube-proxy restarted: %v, want only the cut node's", restarted)
	}
	dss, _ := cs.AppsV1().DaemonSets(contract.Namespace).List(context.Background(), metav1.ListOptions{})
	nss, _ := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if len(dss.Items) != 0 || len(nss.Items) != 0 {
		t.Errorf("left: %d DaemonSets, %d namespaces", len(dss.Items), len(nss.Items))
	}
	if !slices.Contains(nodes.commands, "cut: nft delete table ip svclb-guard") {
		t.Errorf("the guard's table was not deleted: %v", nodes.commands)
	}
	if len(nodes.files["files"]) != 0 {
		t.Errorf("files left: %v", nodes.files["files"])
	}
	if _, err := cs.CoordinationV1().Leases(contract.RunLeaseNamespace).Get(context.Background(), contract.RunLease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("run lease left (get: %v)", err)
	}
}

// TestUninstallRefusedDuringRun: while a suite run holds the cluster's run lock, uninstall
// removes nothing and names the run.
func TestUninstallRefusedDuringRun(t *testing.T) {
	now := metav1.NowMicro()
	cs := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: contract.Namespace}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: contract.GuardName, Namespace: contract.Namespace}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: contract.RunLease, Namespace: contract.RunLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("e2e@elsewhere/pid-1/t"), LeaseDurationSeconds: ptr.To(int32(60)), RenewTime: &now, AcquireTime: &now}})
	u := &Uninstaller{Cluster: &cluster.Cluster{CS: cs}, Nodes: &fakeNodes{}, Log: io.Discard, Poll: 10 * time.Millisecond, Timeout: time.Second}
	err := u.Uninstall(context.Background())
	if !errors.Is(err, cluster.ErrClusterInUse) || !strings.Contains(err.Error(), "e2e@elsewhere") {
		t.Fatalf("Uninstall during a run = %v, want ErrClusterInUse naming the run", err)
	}
	if _, err := cs.AppsV1().DaemonSets(contract.Namespace).Get(context.Background(), contract.GuardName, metav1.GetOptions{}); err != nil {
		t.Errorf("the guard's DaemonSet went although the uninstall was refused: %v", err)
	}
}

// TestUninstallFailsWhileCut: a node whose kube-proxy does not write its table back fails
// the verification, naming the node and the cut element.
func TestUninstallFailsWhileCut(t *testing.T) {
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-n", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-proxy"}},
			Spec: corev1.PodSpec{NodeName: "n"}})
	nodes := &fakeNodes{ruleset: map[string]string{"n": nft(t, "cut")}, files: map[string]map[string]bool{"n": {}}}
	u := &Uninstaller{Cluster: &cluster.Cluster{CS: cs}, Nodes: nodes, Log: io.Discard, Poll: 10 * time.Millisecond, Timeout: 200 * time.Millisecond}
	err := u.RestoreGuard(context.Background())
	if err == nil || !strings.Contains(err.Error(), "node n") {
		t.Fatalf("RestoreGuard = %v, want the node named", err)
	}
}
