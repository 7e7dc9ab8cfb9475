package uninstall

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Nodes runs a command on a node, as root in its host namespaces: *cluster.Cluster
// (NodeExec, docker or daemonset as its Access says); tests pass a fake.
type Nodes interface {
	NodeExec(ctx context.Context, node string, cmd ...string) (string, error)
}

// nodeAccessDaemonSet is the suites' node-access DaemonSet, as Objects lists it.
func nodeAccessDaemonSet() client.Object {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: contract.NodeAccessName, Namespace: contract.Namespace}}
}

// isNodeAccess: o is what the uninstaller's own node access stands on in daemonset mode
// (the DaemonSet and its namespace), deleted only after the last node read.
func isNodeAccess(o client.Object) bool {
	switch o.(type) {
	case *appsv1.DaemonSet:
		return o.GetNamespace() == contract.Namespace && o.GetName() == contract.NodeAccessName
	case *corev1.Namespace:
		return o.GetName() == contract.Namespace
	}
	return false
}

// withNodeAccess runs reads with the nodes reachable: in daemonset mode the node-access
// DaemonSet is deployed first (or a kept run's updated), waited for on every node and
// every node made to answer through it; after reads, whatever they returned, the objects
// last (the DaemonSet, with Uninstall its namespace) are deleted and waited for until gone.
// last is nil when the DaemonSet was there before and is to stay (RestoreGuard after a
// kept run). The error joins reads' and the deletion's.
func (u *Uninstaller) withNodeAccess(ctx context.Context, reads func(context.Context) error, last func(existed bool) []client.Object) error {
	if u.Cluster.Access != cluster.NodeAccessDaemonSet {
		return reads(ctx)
	}
	image, pull := u.accessImage()
	u.logf("node access: deploying %s/%s (%s)", contract.Namespace, contract.NodeAccessName, image)
	existed, err := u.Cluster.DeployNodeAccess(ctx, image, pull, u.timeout())
	if err == nil {
		var names []string
		if names, err = u.nodeNames(ctx); err == nil {
			var seen string
			if seen, err = cluster.NodeAccessAnswers(ctx, names, u.nodes().NodeExec); err == nil {
				u.logf("node access: every node answers (uname -n: %s)", seen)
				err = reads(ctx)
			}
		}
	}
	// A context already done (a second Ctrl-C) still gets the DaemonSet deleted.
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), u.timeout())
	defer cancel()
	if objs := last(existed); len(objs) > 0 {
		if derr := u.remove(cleanup, objs); derr != nil {
			err = errors.Join(err, fmt.Errorf("node access: %w", derr))
		} else {
			u.logf("node access: %s/%s deleted", contract.Namespace, contract.NodeAccessName)
		}
	}
	return err
}

func (u *Uninstaller) accessImage() (string, corev1.PullPolicy) {
	if u.AccessImage == "" {
		return cluster.NodeAccessImage()
	}
	return u.AccessImage, u.AccessPullPolicy
}

func (u *Uninstaller) nodes() Nodes {
	if u.Nodes == nil {
		return u.Cluster
	}
	return u.Nodes
}

// nodeNames are the cluster's nodes as listed now.
func (u *Uninstaller) nodeNames(ctx context.Context) ([]string, error) {
	l, err := u.Cluster.CS.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []string
	for _, n := range l.Items {
		out = append(out, n.Name)
	}
	return out, nil
}
