package e2e

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// applyObjects server-side-applies objects (any kind the scheme knows), so a
// re-run on a kept cluster updates what an earlier run deployed.
// Each fixture applies under its own field manager: two fixtures rendering the
// same object (the namespace) must not remove each other's fields.
func applyObjects(ctx context.Context, manager string, objs []client.Object) error {
	r := suite.cluster.Client.Resources()
	cr := r.GetControllerRuntimeClient()
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, r.GetScheme())
		if err != nil {
			return fmt.Errorf("apply %T: %w", o, err)
		}
		o.GetObjectKind().SetGroupVersionKind(gvk)
		o.SetResourceVersion("")
		o.SetManagedFields(nil)
		//nolint:staticcheck // client.Apply with typed objects is what e2e-framework's klient offers.
		if err := cr.Patch(ctx, o, client.Apply, client.FieldOwner("svclb-e2e-"+manager), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// waitDaemonSet waits until a DaemonSet runs an updated, ready pod on every
// node it targets.
func waitDaemonSet(ctx context.Context, ns, name string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		ds, err := suite.cluster.CS.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		st := ds.Status
		last = fmt.Sprintf("desired %d, updated %d, ready %d", st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady)
		return dsDone(ds), nil
	})
	if err != nil {
		return fmt.Errorf("daemonset %s/%s: %w (%s)", ns, name, err, last)
	}
	return nil
}

func dsDone(ds *appsv1.DaemonSet) bool {
	st := ds.Status
	return st.ObservedGeneration >= ds.Generation && st.DesiredNumberScheduled > 0 &&
		st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberReady == st.DesiredNumberScheduled
}

func deployGuard(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	objs, dsName := guardObjects()
	if err := applyObjects(ctx, "guard", objs); err != nil {
		return ctx, err
	}
	return ctx, waitDaemonSet(ctx, systemNS, dsName, 3*time.Minute)
}

func deployNode(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	objs, err := nodeObjects(cfg.proxy)
	if err != nil {
		return ctx, err
	}
	if err := applyObjects(ctx, "node", objs); err != nil {
		return ctx, err
	}
	if err := waitDaemonSet(ctx, systemNS, nodeDaemonSet, 3*time.Minute); err != nil {
		return ctx, err
	}
	// Ready pods are not enough: every agent must answer /status.
	pods, err := agentPods(ctx)
	if err != nil {
		return ctx, err
	}
	for _, p := range pods {
		s, err := getAgentStatus(ctx, p.Name)
		if err != nil {
			return ctx, err
		}
		progress("agent on %s: phase1=%v phase2=%v snapshot %s", p.Spec.NodeName, s.Phase1, s.Phase2, s.SnapshotVersion)
	}
	return ctx, nil
}
