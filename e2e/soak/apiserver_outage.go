package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/faults"
)

// KindAPIServer is the apiserver made unavailable.
const KindAPIServer = "apiserver"

// apiserverOutage makes the apiserver unavailable for about
// cfg.APIServerHold plus its restart.
type apiserverOutage struct{}

func (apiserverOutage) Name() string { return KindAPIServer }

func (apiserverOutage) Describe() string {
	return "the apiserver is away (the data plane keeps its last config)"
}

func (apiserverOutage) Windows(Layout) []Window { return one("apiserver away") }

func (f apiserverOutage) Fails(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingFails(f)
}

func (f apiserverOutage) Cuts(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingCut(f)
}

// Settle: the controllers lost their leases while it was away and
// restart; the next fault needs them.
func (apiserverOutage) Settle(ctx context.Context, r *runner) {
	if err := nodePodsRunning(ctx, r.c, r.rec.Env.NotReadyBefore); err != nil {
		r.addError("after the apiserver outage: %v", err)
	}
}

// Needs: the manifest goes back through node access that does not pass through the apiserver.
func (apiserverOutage) Needs(c *cluster.Cluster) error { return faults.OutagePossible(c) }

func (apiserverOutage) Run(ctx context.Context, r *runner, w *Window, _ int) error {
	node, err := faults.ControlPlane(r.c)
	if err != nil {
		return err
	}
	w.Node = node
	if r.heldBack(w, controllersKey(node), "kube-controller-manager and kube-scheduler", node) {
		return nil
	}
	o, err := faults.APIServerOutage(ctx, r.c, r.cfg.APIServerHold, 3*time.Minute)
	w.Node, w.Start = o.Node, o.Parked
	for _, s := range []Step{{"manifest moved away", o.Parked}, {"/readyz failing", o.Down}, {"manifest back", o.Restored}, {"/readyz ok", o.Up}} {
		if !s.At.IsZero() {
			w.Steps = append(w.Steps, s)
		}
	}
	if err != nil {
		return err
	}
	w.notef("apiserver unavailable %s (held away %s, then %s to start)", o.Unavailable().Round(100*time.Millisecond), r.cfg.APIServerHold, o.Up.Sub(o.Restored).Round(100*time.Millisecond))
	// The window lasts until the controllers lead again: the next fault
	// (a Service recreated, a rollout) needs their EndpointSlices and
	// garbage collection, and a control plane half back would be judged
	// as that fault's.
	leading, err := faults.WaitControllersLeading(ctx, r.c, o.Up, 3*time.Minute)
	r.restarted[controllersKey(o.Node)] = time.Now()
	if err != nil {
		return err
	}
	w.step("controllers lead again")
	n, err := faults.ControllerRestarts(ctx, r.c, o.Node)
	if err != nil {
		return err
	}
	w.notef("controllers lead again %s after /readyz ok (restarts so far: %s)", leading.Sub(o.Up).Round(100*time.Millisecond), formatCounts(n))
	return nil
}

// controllersKey is restarted's key of the control plane's controllers,
// which an apiserver outage restarts (faults.WaitControllersLeading).
func controllersKey(node string) string { return "controllers/" + node }

func formatCounts(n map[string]int32) string {
	var out []string
	for _, k := range sortedKeys(n) {
		out = append(out, fmt.Sprintf("%s %d", k, n[k]))
	}
	return strings.Join(out, ", ")
}
