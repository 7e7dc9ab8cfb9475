package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// annotationImageIDs carries the IDs of a DaemonSet's images in its pod
// template. The images are tagged :dev and kind-loaded, so on a kept cluster
// (KEEP_CLUSTER=1) a rebuilt image changes nothing in the spec and the
// running pods would keep the old binaries; with the IDs in the template, a
// rebuild rolls the DaemonSet.
const annotationImageIDs = "svclb.dev/image-ids"

// stampImageIDs sets annotationImageIDs on every DaemonSet in objs from the
// local Docker's image IDs (what `make images` built and kind loaded). An
// image Docker does not have is stamped "?": it cannot have been rebuilt.
func stampImageIDs(ctx context.Context, objs []client.Object) {
	for _, o := range objs {
		ds, ok := o.(*appsv1.DaemonSet)
		if !ok {
			continue
		}
		spec := &ds.Spec.Template.Spec
		var ids []string
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			id := "?"
			if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", c.Image).Output(); err == nil {
				id = strings.TrimPrefix(strings.TrimSpace(string(out)), "sha256:")
				id = id[:min(12, len(id))]
			}
			ids = append(ids, c.Name+"="+id)
		}
		if ds.Spec.Template.Annotations == nil {
			ds.Spec.Template.Annotations = map[string]string{}
		}
		ds.Spec.Template.Annotations[annotationImageIDs] = strings.Join(ids, ",")
	}
}

func deployGuard(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	objs, dsName := guardObjects()
	stampImageIDs(ctx, objs)
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
	stampImageIDs(ctx, objs)
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
