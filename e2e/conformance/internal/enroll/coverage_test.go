package enroll

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCoverageNamesNamespacesTheSelectorMisses(t *testing.T) {
	cs := fake.NewClientset()
	cov, err := WatchCoverage(context.Background(), cs, "e2e-framework in (services,traffic-distribution)")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, base := range map[string]string{"services-1": "services", "traffic-distribution-2": "traffic-distribution", "nettest-3": "nettest", "other": ""} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if base != "" {
			ns.Labels[FrameworkLabel] = base
		}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The three the framework made (the fake's list ignores the label selector: add filters too).
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		cov.mu.Lock()
		defer cov.mu.Unlock()
		return cov.seen >= 3, nil
	}); err != nil {
		t.Fatal(err)
	}
	seen, missed := cov.Stop()
	if seen != 3 || !slices.Equal(missed, []string{"nettest-3 (e2e-framework=nettest)"}) {
		t.Errorf("seen %d, missed %q", seen, missed)
	}
}

func TestCoverageRefusesABadSelector(t *testing.T) {
	if _, err := WatchCoverage(context.Background(), fake.NewClientset(), "a in ("); err == nil {
		t.Error("no error")
	}
}
