package uninstall

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestObjectsTakeNodeAccess: the uninstall removes the suites' node-access DaemonSet (root on
// every node) with the other DaemonSets, before any namespace.
func TestObjectsTakeNodeAccess(t *testing.T) {
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	at, firstNS := -1, -1
	for i, o := range objs {
		if _, ok := o.(*appsv1.DaemonSet); ok && o.GetName() == contract.NodeAccessName && o.GetNamespace() == contract.Namespace {
			at = i
		}
		if _, ok := o.(*corev1.Namespace); ok && firstNS < 0 {
			firstNS = i
		}
	}
	if at < 0 || at > firstNS {
		t.Errorf("node-access DaemonSet at %d, first namespace at %d: want it listed, before the namespaces", at, firstNS)
	}
}
