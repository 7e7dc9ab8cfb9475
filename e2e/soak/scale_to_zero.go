package soak

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
)

// KindScale is TargetScale scaled to 0 and back.
const KindScale = "scale"

// scaleToZero scales the scale Deployment to 0, waits until every node's
// proxy has no endpoint for it (refusing no-endpoints), holds, scales it
// back to 2 and waits until the proxies balance over the new pods and the
// old ones are gone.
type scaleToZero struct{}

func (scaleToZero) Name() string { return KindScale }

func (scaleToZero) Describe() string {
	return "the " + TargetScale + " Deployment is scaled to 0 and back"
}

func (scaleToZero) Windows(Layout) []Window { return one("scale " + TargetScale + " to 0 and back") }

func (scaleToZero) Run(ctx context.Context, r *runner, w *Window, _ int) error {
	w.Target = TargetScale
	old, err := r.livePods(ctx, TargetScale)
	if err != nil {
		return err
	}
	w.Pods = podNames(old)
	w.Start = time.Now()
	if err := r.setReplicas(ctx, TargetScale, 0); err != nil {
		return err
	}
	w.step("scaled to 0")
	if err := r.waitHolds(ctx, r.wl.services[TargetScale], nil); err != nil {
		return err
	}
	w.step("no endpoint on any node's proxy")
	if !sleepCtx(ctx, r.cfg.ScaleHold) {
		return ctx.Err()
	}
	if err := r.setReplicas(ctx, TargetScale, 2); err != nil {
		return err
	}
	w.step("scaled to 2")
	if err := r.waitReplaced(ctx, w, TargetScale, 2, old); err != nil {
		return err
	}
	w.notef("held at 0 for %s after every node's proxy had no endpoint", r.cfg.ScaleHold)
	return nil
}

// Settle reads the refusals the scale made before the next fault.
func (scaleToZero) Settle(ctx context.Context, r *runner) { r.readRefusals(ctx) }

// Fails: a connection a removed pod answered, cut by its shutdown; and one
// closed before any backend answered that an agent refused no-endpoints
// naming the Service (Phase 2 refuses an empty cluster, UH).
func (scaleToZero) Fails(r *Record, w Window, _ Client, e echo.LoadEvent) (bool, string) {
	return targetedFails(r, w, e, func(ref Refusal) (bool, string) {
		if ref.Reason != agent.ReasonNoEndpoints || ref.Service != w.Target {
			return false, fmt.Sprintf("refused %s (%s/%s), but scaling %s to 0 may only refuse %s naming it", ref.Reason, ref.Namespace, ref.Service, w.Target, agent.ReasonNoEndpoints)
		}
		return true, ""
	})
}

func (scaleToZero) Cuts(_ *Record, w Window, _ Client, e echo.LoadEvent) (bool, string) {
	return removedBackendCuts(w, e)
}

func (r *runner) setReplicas(ctx context.Context, name string, n int) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := r.c.CS.AppsV1().Deployments(Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scale %s to %d: %w", name, n, err)
	}
	return nil
}
