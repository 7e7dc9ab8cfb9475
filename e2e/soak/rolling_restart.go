package soak

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// KindRolling is the rolling restart of TargetRoll.
const KindRolling = "rolling"

// rollingRestart restarts the roll Deployment (a new pod template) and
// waits until the rollout is complete, the old pods are gone and every
// worker's proxy balances over the new pods only.
type rollingRestart struct{}

func (rollingRestart) Name() string { return KindRolling }

func (rollingRestart) Describe() string {
	return "the " + TargetRoll + " Deployment restarts, one pod at a time"
}

func (rollingRestart) Windows(Layout) []Window { return one("rolling restart of " + TargetRoll) }

func (rollingRestart) Run(ctx context.Context, r *runner, w *Window, _ int) error {
	w.Target = TargetRoll
	old, err := r.livePods(ctx, TargetRoll)
	if err != nil {
		return err
	}
	w.Pods = podNames(old)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"svclb.dev/soak-restart":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	w.Start = time.Now()
	if _, err := r.c.CS.AppsV1().Deployments(Namespace).Patch(ctx, TargetRoll, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("restart deployment %s: %w", TargetRoll, err)
	}
	w.step("template changed")
	if err := r.waitReplaced(ctx, w, TargetRoll, 3, old); err != nil {
		return err
	}
	w.notef("%d backends replaced one by one (maxSurge 1, maxUnavailable 0; each old one serves %s after its endpoint goes)", len(old), DelayShutdown)
	return nil
}

// Fails: a connection a removed pod answered, cut by its shutdown; nothing
// before a backend answers, as a ready backend always remains.
func (rollingRestart) Fails(r *Record, w Window, _ Client, e echo.LoadEvent) (bool, string) {
	return targetedFails(r, w, e, nil)
}

func (rollingRestart) Cuts(_ *Record, w Window, _ Client, e echo.LoadEvent) (bool, string) {
	return removedBackendCuts(w, e)
}
