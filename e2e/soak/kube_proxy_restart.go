package soak

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/faults"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/pkg/kubeproxyguard"
)

// KindKubeProxy is kube-proxy restarted on each node in turn.
const KindKubeProxy = "kube-proxy"

// kubeProxyRestart restarts each node's kube-proxy in turn and waits until
// the guard there has cut every soak Service again.
type kubeProxyRestart struct{}

func (kubeProxyRestart) Describe() string {
	return "kube-proxy restarts (meshed traffic is not on its path)"
}

func (f kubeProxyRestart) Fails(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingFails(f)
}

func (f kubeProxyRestart) Cuts(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingCut(f)
}

func (kubeProxyRestart) Name() string { return KindKubeProxy }

func (kubeProxyRestart) Windows(l Layout) []Window {
	var out []Window
	for _, n := range l.Nodes {
		out = append(out, Window{Name: "kube-proxy restart on " + n, Node: n})
	}
	return out
}

func (kubeProxyRestart) Run(ctx context.Context, r *runner, w *Window, _ int) error {
	node := w.Node
	before, err := r.guardState(ctx, node)
	if err != nil {
		return err
	}
	kp, err := faults.RestartKubeProxy(ctx, r.c, node, 2*time.Minute)
	w.Start = kp.Deleted
	if err != nil {
		return err
	}
	w.Steps = append(w.Steps, Step{"pod deleted", kp.Deleted}, Step{"new pod Ready", kp.Ready})
	var after map[string]kubeproxyguard.ServiceStatus
	var last string
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		after, err = r.guardState(ctx, node)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for name, b := range before {
			a, ok := after[name]
			if !ok || a.Redeletions <= b.Redeletions || a.State != kubeproxyguard.StateClean {
				last = fmt.Sprintf("%s: redeletions %d (before %d), state %q", name, a.Redeletions, b.Redeletions, a.State)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the guard on %s did not cut every soak Service again: %w (%s)", node, err, last)
	}
	w.step("guard cut every soak Service again")
	var lat []float64
	r.mu.Lock()
	for _, name := range sortedKeys(after) {
		a := after[name]
		d := Redeletion{Node: node, Service: name, Latency: time.Duration(a.LastRedeletionLatencySeconds * float64(time.Second))}
		if a.LastRedeletion != nil {
			d.AfterDelete = a.LastRedeletion.Sub(kp.Deleted)
		}
		r.rec.Figures.Redeletions = append(r.rec.Figures.Redeletions, d)
		lat = append(lat, a.LastRedeletionLatencySeconds*1000)
	}
	r.mu.Unlock()
	w.notef("new kube-proxy Ready %s after the delete; the guard cut %d Services again, latency p50 %.1f ms, max %.1f ms",
		kp.Ready.Sub(kp.Deleted).Round(100*time.Millisecond), len(after), Percentile(lat, 50), Percentile(lat, 100))
	return nil
}

// guardState is node's guard's status of every soak Service.
func (r *runner) guardState(ctx context.Context, node string) (map[string]kubeproxyguard.ServiceStatus, error) {
	sts, err := guard.Statuses(ctx, r.c)
	if err != nil {
		return nil, err
	}
	st, ok := sts[node]
	if !ok {
		return nil, fmt.Errorf("no guard on %s", node)
	}
	out := map[string]kubeproxyguard.ServiceStatus{}
	for _, s := range st.Services {
		if s.Namespace == Namespace {
			out[s.Name] = s
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the guard on %s guards no Service of %s", node, Namespace)
	}
	return out, nil
}
