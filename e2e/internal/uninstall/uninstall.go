package uninstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// kube-proxy's DaemonSet pods (kubeadm's, and so kind's).
const (
	kubeProxyNamespace = "kube-system"
	kubeProxySelector  = "k8s-app=kube-proxy"
)

// cniFiles are what svclb-cni's installer puts on a node.
var cniFiles = []string{contract.CNIConfDir + "/" + contract.CNIConfFile, contract.CNIBinDir + "/" + contract.CNIPluginType}

// Uninstaller removes svclb from Cluster, reading and fixing nodes through Nodes.
type Uninstaller struct {
	// Cluster: its CS for the objects; its Access says how nodes are reached (ChooseAccess):
	// in daemonset mode the uninstaller deploys the node-access DaemonSet for its node reads
	// and deletes it after the last one.
	Cluster *cluster.Cluster
	// Nodes runs the node commands; nil: Cluster (NodeExec).
	Nodes Nodes
	// AccessImage and AccessPullPolicy of the node-access DaemonSet (daemonset mode);
	// cluster.NodeAccessImage's when AccessImage is empty.
	AccessImage      string
	AccessPullPolicy corev1.PullPolicy
	Log              io.Writer
	// Timeout bounds each wait (objects gone, kube-proxy back, the nodes clean); 3m when zero.
	Timeout time.Duration
	// Poll is the interval of those waits; 2s when zero.
	Poll time.Duration
	// Namespaces are the workload namespaces to delete too (WorkloadNamespaces).
	Namespaces []string
}

func (u *Uninstaller) timeout() time.Duration {
	if u.Timeout == 0 {
		return 3 * time.Minute
	}
	return u.Timeout
}

func (u *Uninstaller) poll() time.Duration {
	if u.Poll == 0 {
		return 2 * time.Second
	}
	return u.Poll
}

func (u *Uninstaller) logf(format string, args ...any) { fmt.Fprintf(u.Log, format+"\n", args...) }

// RestoreGuard is what an interrupted run needs: the guard DaemonSet removed, so nothing
// cuts again, and every node's cuts put back and verified. The agent stays: it serves meshed
// pods only. In daemonset mode a node-access DaemonSet a kept run left stays too; one the
// restore deployed is deleted.
func (u *Uninstaller) RestoreGuard(ctx context.Context) error {
	objs, err := Objects()
	if err != nil {
		return err
	}
	return u.withNodeAccess(ctx, func(ctx context.Context) error {
		for _, o := range objs {
			if ds, ok := o.(*appsv1.DaemonSet); ok && ds.Name == contract.GuardName {
				if err := u.remove(ctx, []client.Object{o}); err != nil {
					return err
				}
			}
		}
		return u.putBackAndVerify(ctx, false)
	}, func(existed bool) []client.Object {
		if existed {
			return nil
		}
		return []client.Object{nodeAccessDaemonSet()}
	})
}

// Uninstall removes everything svclb deployed and the workload namespaces, puts every
// node's cuts back, and verifies each node. Its error lists every node not clean. In
// daemonset mode the node-access DaemonSet and its namespace are deleted last, after the
// verification (which reads the nodes through it), whether it passed or not.
func (u *Uninstaller) Uninstall(ctx context.Context) error {
	objs, err := Objects()
	if err != nil {
		return err
	}
	for _, ns := range u.Namespaces {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	var first, last []client.Object
	for _, o := range objs {
		if u.Cluster.Access == cluster.NodeAccessDaemonSet && isNodeAccess(o) {
			last = append(last, o)
		} else {
			first = append(first, o)
		}
	}
	// A suite run in progress would redeploy or judge what this removes: refuse while one holds
	// the cluster; the lock's Lease goes last.
	lock, err := cluster.LockRun(ctx, u.Cluster.CS, cluster.RunHolder("uninstall"), u.logf)
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	err = u.withNodeAccess(ctx, func(ctx context.Context) error {
		if err := u.remove(ctx, first); err != nil {
			return err
		}
		return u.putBackAndVerify(ctx, true)
	}, func(bool) []client.Object { return last })
	lock.Release()
	lerr := u.Cluster.CS.CoordinationV1().Leases(contract.RunLeaseNamespace).Delete(ctx, contract.RunLease, metav1.DeleteOptions{})
	if lerr != nil && !apierrors.IsNotFound(lerr) {
		err = errors.Join(err, fmt.Errorf("delete lease %s/%s: %w", contract.RunLeaseNamespace, contract.RunLease, lerr))
	}
	return err
}

// remove deletes objs in order and waits until every one that was there is gone (a
// DaemonSet with its pods, foreground; a namespace with what it held).
func (u *Uninstaller) remove(ctx context.Context, objs []client.Object) error {
	var deleted []client.Object
	for _, o := range objs {
		there, err := deleteObject(ctx, u.Cluster.CS, o)
		if err != nil {
			return err
		}
		if there {
			u.logf("deleting %s", describe(o))
			deleted = append(deleted, o)
		}
	}
	for _, o := range deleted {
		err := wait.PollUntilContextTimeout(ctx, u.poll(), u.timeout(), true, func(ctx context.Context) (bool, error) {
			return gone(ctx, u.Cluster.CS, o)
		})
		if err != nil {
			return fmt.Errorf("%s not gone after %s: %w", describe(o), u.timeout(), err)
		}
	}
	if len(deleted) > 0 {
		u.logf("deleted %d objects", len(deleted))
	}
	return nil
}

func describe(o client.Object) string {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", o), "*")
	if o.GetNamespace() == "" {
		return kind + " " + o.GetName()
	}
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// gone reports whether o is no longer there (only the kinds remove waits for matter: the
// DaemonSets and namespaces; the rest go at once).
func gone(ctx context.Context, cs kubernetes.Interface, o client.Object) (bool, error) {
	var err error
	switch o.(type) {
	case *appsv1.DaemonSet:
		_, err = cs.AppsV1().DaemonSets(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
	case *corev1.Namespace:
		_, err = cs.CoreV1().Namespaces().Get(ctx, o.GetName(), metav1.GetOptions{})
	default:
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, nil
}

// putBackAndVerify fixes every node (its cuts, the guard's table, with cni the plugin's
// files) and then waits until every node is clean.
func (u *Uninstaller) putBackAndVerify(ctx context.Context, cni bool) error {
	nodes, err := u.nodeNames(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		if err := u.putBack(ctx, n, cni); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n, err))
		}
	}
	for _, n := range nodes {
		if err := u.verify(ctx, n, cni); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n, err))
		} else {
			u.logf("%s: verified clean", n)
		}
	}
	return errors.Join(errs...)
}

func (u *Uninstaller) ruleset(ctx context.Context, node string) (Findings, error) {
	rs, err := u.nodes().NodeExec(ctx, node, "nft", "list", "ruleset")
	if err != nil {
		return Findings{}, err
	}
	return Inspect(rs), nil
}

// putBack deletes the node's svclb tables, restarts its kube-proxy while its table holds a
// cut element and, with cni, removes the plugin's files the installer left.
func (u *Uninstaller) putBack(ctx context.Context, node string, cni bool) error {
	f, err := u.ruleset(ctx, node)
	if err != nil {
		return err
	}
	u.logf("%s before: %s", node, f)
	for _, t := range f.SvclbTables {
		family, name, _ := strings.Cut(t, " ")
		if _, err := u.nodes().NodeExec(ctx, node, "nft", "delete", "table", family, name); err != nil {
			return err
		}
		u.logf("%s: deleted table %s", node, t)
	}
	if len(f.Cut) > 0 {
		if err := u.restartKubeProxy(ctx, node); err != nil {
			return err
		}
	}
	if cni {
		for _, p := range cniFiles {
			out, err := u.nodes().NodeExec(ctx, node, "rm", "-v", "-f", p)
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != "" {
				u.logf("%s: removed %s (left by the installer)", node, p)
			}
		}
	}
	return nil
}

// restartKubeProxy deletes node's kube-proxy pod and waits for its successor to be Ready:
// kube-proxy's full sync at start writes every element back with its own verdict.
func (u *Uninstaller) restartKubeProxy(ctx context.Context, node string) error {
	pods := u.Cluster.CS.CoreV1().Pods(kubeProxyNamespace)
	on := func(ctx context.Context) ([]corev1.Pod, error) {
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: kubeProxySelector, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return nil, fmt.Errorf("list kube-proxy pods: %w", err)
		}
		var out []corev1.Pod
		for _, p := range l.Items {
			if p.Spec.NodeName == node {
				out = append(out, p)
			}
		}
		return out, nil
	}
	old, err := on(ctx)
	if err != nil {
		return err
	}
	if len(old) == 0 {
		return fmt.Errorf("cut elements remain and no kube-proxy pod (%s in %s) runs on the node to write them back", kubeProxySelector, kubeProxyNamespace)
	}
	oldUIDs := map[string]bool{}
	for _, p := range old {
		oldUIDs[string(p.UID)] = true
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete kube-proxy pod %s: %w", p.Name, err)
		}
		u.logf("%s: cut elements remain: restarting kube-proxy (pod %s) for a full sync", node, p.Name)
	}
	return wait.PollUntilContextTimeout(ctx, u.poll(), u.timeout(), true, func(ctx context.Context) (bool, error) {
		now, err := on(ctx)
		if err != nil {
			return false, nil
		}
		for _, p := range now {
			if !oldUIDs[string(p.UID)] && cluster.PodReady(&p) {
				return true, nil
			}
		}
		return false, nil
	})
}

// verify waits until node's ruleset is clean (kube-proxy's restart writes it back within
// seconds) and, with cni, the plugin's files are absent; it logs the last findings.
func (u *Uninstaller) verify(ctx context.Context, node string, cni bool) error {
	var f Findings
	var left []string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, u.poll(), u.timeout(), true, func(ctx context.Context) (bool, error) {
		f, lastErr = u.ruleset(ctx, node)
		if lastErr != nil {
			return false, nil
		}
		left = nil
		if cni {
			for _, p := range cniFiles {
				if _, err := u.nodes().NodeExec(ctx, node, "test", "!", "-e", p); err != nil {
					left = append(left, p)
				}
			}
		}
		return f.Clean() && len(left) == 0, nil
	})
	if lastErr != nil {
		return lastErr
	}
	u.logf("%s after: %s", node, f)
	if err != nil {
		msg := []string{}
		if !f.Clean() {
			msg = append(msg, f.String())
			for _, c := range f.Cut {
				msg = append(msg, "cut: "+c)
			}
		}
		for _, p := range left {
			msg = append(msg, p+" still there")
		}
		return fmt.Errorf("not clean after %s: %s", u.timeout(), strings.Join(msg, "; "))
	}
	return nil
}
