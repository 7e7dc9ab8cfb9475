package soak

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/faults"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// KindProxy is the node proxy restarted on the first worker.
const KindProxy = "proxy"

// pollCost is about what one read of a pod netns' sockets through the
// node container takes on a loaded 2-core host: the resolution of the
// listener watch.
const pollCost = 100 * time.Millisecond

// proxyRestart restarts the proxy container on the first worker and waits
// until every soak pod's capture listener there is bound again.
type proxyRestart struct{}

func (proxyRestart) Name() string { return KindProxy }

func (proxyRestart) Describe() string { return "the node proxy restarts" }

func (proxyRestart) Windows(l Layout) []Window {
	if len(l.Workers) == 0 {
		return nil
	}
	return []Window{{Name: "node proxy restart on " + l.Workers[0], Node: l.Workers[0]}}
}

func (proxyRestart) Run(ctx context.Context, r *runner, w *Window, _ int) error {
	node := w.Node
	if r.heldBack(w, "proxy/"+node, "the node proxy", node) {
		return nil
	}
	defer func() { r.restarted["proxy/"+node] = time.Now() }()
	b, err := r.c.NodeGet(ctx, node, contract.AgentPort, "/status")
	if err != nil {
		return err
	}
	st, err := agent.DecodeStatus(b)
	if err != nil {
		return err
	}
	netns := map[string]string{}
	for _, l := range st.Listeners {
		if l.Namespace == Namespace {
			netns[l.Pod] = l.Netns
		}
	}
	if err := r.stats.bank(ctx, r.c, node, true); err != nil {
		return err
	}
	// The kubelet reports the new container late (its pod status is
	// batched): watch the load client's listener itself, from before the
	// kill, for when it went and came back.
	var gone, back time.Time
	wctx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	defer func() {
		stopWatch()
		watching.Wait()
	}()
	if ns, ok := netns["load-"+node]; ok {
		watching.Go(func() {
			for wctx.Err() == nil {
				ls, err := proxy.Listening(wctx, r.c, node, ns)
				now := time.Now()
				up := err == nil && slices.ContainsFunc(ls, func(a netip.AddrPort) bool { return a.Port() == contract.CapturePort })
				switch {
				case err != nil:
				case !up && gone.IsZero():
					gone = now
				case up && !gone.IsZero():
					back = now
					return
				}
			}
		})
	}
	rs, err := faults.RestartProxy(ctx, r.c, node, restartWithin)
	w.Start = rs.Killed
	w.Steps = append(w.Steps, Step{"killed", rs.Killed}, Step{"running (kubelet)", rs.Running}, Step{"/ready LIVE", rs.Ready})
	if err != nil {
		stopWatch()
		watching.Wait()
		return err
	}
	for _, pod := range sortedKeys(netns) {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			ls, err := proxy.Listening(ctx, r.c, node, netns[pod])
			if err != nil {
				return false, nil
			}
			for _, l := range ls {
				if l.Port() == contract.CapturePort {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("%s's listener not bound again: %w", pod, err)
		}
		w.step("listener of " + pod + " bound")
	}
	w.End = time.Now()
	stopWatch()
	watching.Wait()
	if !gone.IsZero() && !back.IsZero() {
		w.Steps = append(w.Steps, Step{"client's listener seen gone", gone}, Step{"client's listener seen back", back})
		w.notef("the client's listener was seen gone %s after the kill and back %s later (polled through the node, ~%s a read)",
			gone.Sub(rs.Killed).Round(10*time.Millisecond), back.Sub(gone).Round(10*time.Millisecond), pollCost)
	}
	w.notef("kill → the kubelet reports it running %s (its status lags), → /ready %s, → every listener bound %s",
		rs.Down().Round(10*time.Millisecond), rs.Ready.Sub(rs.Running).Round(10*time.Millisecond), w.End.Sub(rs.Ready).Round(10*time.Millisecond))
	if rs.BackOff {
		w.notef("the kubelet held the restart back (CrashLoopBackOff: killed again within 10 min of its last restart)")
	}
	return nil
}

// Fails: anything from the clients on its node, whose captured egress has
// no listener while the proxy is down; nothing elsewhere.
func (proxyRestart) Fails(_ *Record, w Window, c Client, _ echo.LoadEvent) (bool, string) {
	if c.Node == w.Node {
		return true, "captured egress on " + w.Node + " while its node proxy was down"
	}
	return false, "the node proxy restarted on " + w.Node + ", not on this client's node " + c.Node
}

func (f proxyRestart) Cuts(_ *Record, w Window, c Client, _ echo.LoadEvent) (bool, string) {
	if c.Node == w.Node {
		return true, "its node proxy on " + w.Node + " went down"
	}
	return nothingCut(f)
}

// Analyze records, per client target on the restarted node, the way
// through the window (Figures.ProxyRestarts).
func (proxyRestart) Analyze(r *Record, w Window) []Bound {
	if w.Skipped {
		return nil
	}
	for _, c := range r.Clients {
		if c.Node != w.Node {
			continue
		}
		for _, t := range targets() {
			r.Figures.ProxyRestarts = append(r.Figures.ProxyRestarts, proxyRecovery(c, t, w))
		}
	}
	return nil
}
