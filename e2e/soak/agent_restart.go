package soak

import (
	"context"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/faults"
)

// KindAgent is the agent restarted on each worker in turn.
const KindAgent = "agent"

// agentRestart restarts the agent container on each worker in turn.
type agentRestart struct{}

func (agentRestart) Describe() string { return "the agent restarts (the proxy keeps its last config)" }

func (f agentRestart) Fails(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingFails(f)
}

func (f agentRestart) Cuts(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingCut(f)
}

func (agentRestart) Name() string { return KindAgent }

func (agentRestart) Windows(l Layout) []Window {
	var out []Window
	for _, n := range l.Workers {
		out = append(out, Window{Name: "agent restart on " + n, Node: n})
	}
	return out
}

func (agentRestart) Run(ctx context.Context, r *runner, w *Window, _ int) error {
	node := w.Node
	if r.heldBack(w, "agent/"+node, "the agent", node) {
		return nil
	}
	rs, err := faults.RestartAgent(ctx, r.c, node, restartWithin)
	defer func() { r.restarted["agent/"+node] = time.Now() }()
	w.Start = rs.Killed
	w.Steps = append(w.Steps, Step{"killed", rs.Killed}, Step{"running", rs.Running}, Step{"serving /status", rs.Ready})
	if err != nil {
		return err
	}
	w.notef("agent down %s, serving again %s after the kill (restart count %d)", rs.Down().Round(100*time.Millisecond), rs.Total().Round(100*time.Millisecond), rs.RestartCount)
	if rs.BackOff {
		w.notef("the kubelet held the restart back (CrashLoopBackOff: killed again within 10 min of its last restart)")
	}
	return nil
}
