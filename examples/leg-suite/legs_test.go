package legsuite

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/fixtures/cluster"
)

// TestDeclaration checks the legs without a cluster: each is a valid
// declaration, and the suite's legs are Order's, in its order.
func TestDeclaration(t *testing.T) {
	if err := Reach.Validate(); err != nil {
		t.Error(err)
	}
	var names []string
	for _, l := range Legs.Legs() {
		names = append(names, l.Name)
	}
	if !slices.Equal(names, Order) {
		t.Errorf("legs %v, want Order %v", names, Order)
	}
}

// TestReachNeeds: the leg runs on a cluster with a schedulable worker and
// is skipped, saying why, on one whose only node is the control plane.
func TestReachNeeds(t *testing.T) {
	ready := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	cp := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{cluster.LabelControlPlane: ""}}, Status: ready}
	worker := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Status: ready}
	if reason, ok := Reach.Needs.Check([]corev1.Node{cp, worker}); !ok {
		t.Errorf("a control plane and a worker: skipped (%s)", reason)
	}
	if reason, ok := Reach.Needs.Check([]corev1.Node{cp}); ok || reason == "" {
		t.Errorf("the control plane alone: ok %v, reason %q; want skipped with a reason", ok, reason)
	}
}
