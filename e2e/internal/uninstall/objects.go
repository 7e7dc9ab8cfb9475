package uninstall

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/manifests"
)

// WorkloadNamespaces are the namespaces the suites run their workloads in (the legs'
// svclb-e2e and svclb-enroll, e2e/suite_test.go and e2e/enroll_test.go; the soak's and the
// perf suite's): a kept run leaves them, and their Services are in kube-proxy's table.
var WorkloadNamespaces = []string{"svclb-e2e", "svclb-enroll", "svclb-soak", "svclb-perf", "svclb-perf-scale"}

// Objects are what svclb deploys, in delete order: the guard's objects (its DaemonSet
// first: while it runs it cuts again), then the node DaemonSet's with either proxy (Envoy's
// bootstrap ConfigMap too), then the suites' node-access DaemonSet (root on every node, left by
// a kept run in daemonset mode: fixtures/cluster), each DaemonSet before what it uses; the
// namespaces last.
func Objects() ([]client.Object, error) {
	var all []client.Object
	all = append(all, guard.Objects(guard.Defaults())...)
	for _, p := range []string{manifests.ProxyBuiltin, manifests.ProxyEnvoy} {
		objs, err := agent.Objects(agent.Options{Proxy: p})
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
	}
	image, pull := cluster.NodeAccessImage()
	all = append(all, cluster.NodeAccessObjects(image, pull)...)
	seen := map[string]bool{}
	var daemonSets, rest, namespaces []client.Object
	for _, o := range all {
		k := fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName())
		if seen[k] {
			continue
		}
		seen[k] = true
		switch o.(type) {
		case *appsv1.DaemonSet:
			daemonSets = append(daemonSets, o)
		case *corev1.Namespace:
			namespaces = append(namespaces, o)
		default:
			rest = append(rest, o)
		}
	}
	return slices.Concat(daemonSets, rest, namespaces), nil
}

// deleteObject deletes o (foreground: a DaemonSet's pods go before it does); one that is
// not there is fine. It reports whether it was there.
func deleteObject(ctx context.Context, cs kubernetes.Interface, o client.Object) (bool, error) {
	fg := metav1.DeletePropagationForeground
	opts := metav1.DeleteOptions{PropagationPolicy: &fg}
	ns, name := o.GetNamespace(), o.GetName()
	var err error
	switch o.(type) {
	case *appsv1.DaemonSet:
		err = cs.AppsV1().DaemonSets(ns).Delete(ctx, name, opts)
	case *corev1.Namespace:
		err = cs.CoreV1().Namespaces().Delete(ctx, name, opts)
	case *corev1.ServiceAccount:
		err = cs.CoreV1().ServiceAccounts(ns).Delete(ctx, name, opts)
	case *corev1.ConfigMap:
		err = cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, opts)
	case *rbacv1.ClusterRole:
		err = cs.RbacV1().ClusterRoles().Delete(ctx, name, opts)
	case *rbacv1.ClusterRoleBinding:
		err = cs.RbacV1().ClusterRoleBindings().Delete(ctx, name, opts)
	case *rbacv1.Role:
		err = cs.RbacV1().Roles(ns).Delete(ctx, name, opts)
	case *rbacv1.RoleBinding:
		err = cs.RbacV1().RoleBindings(ns).Delete(ctx, name, opts)
	default:
		return false, fmt.Errorf("uninstall: no delete for %T %s/%s", o, ns, name)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete %T %s/%s: %w", o, ns, name, err)
	}
	return true, nil
}
