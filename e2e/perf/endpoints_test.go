package perf

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/e2e/perf/internal/slicewatch"
	"github.com/aether-mesh/svclb/e2e/perf/internal/traffic"
)

const (
	// movedReplies is how many replies in a row from podA, after the event
	// and after podX's last reply, say podX left a path: with two endpoints
	// kube-proxy picks podX by chance with probability 1/2 each time, so
	// 30 in a row without it is chance once in 10^9; round robin never.
	movedReplies = 30
	// eventWithin bounds the wait for a gate flip to reach both Services'
	// EndpointSlices (kubelet, then the EndpointSlice controller).
	eventWithin = time.Minute
	// movedWithin bounds the wait for traffic to move after it.
	movedWithin = 2 * time.Minute
)

// path is one side of a measurement: a client dialling a Service.
type path struct {
	name   string // "agent" or "kube-proxy"
	client *corev1.Pod
	svc    *corev1.Service
	to     string
	s      *traffic.Stream
}

// TestEndpointChange: the base figure, with nothing but the suite's own
// Services on the cluster.
func TestEndpointChange(t *testing.T) {
	needCluster(t)
	res, err := measureChanges(t.Context(), suite.w, cfg.changes, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := result.Write(cfg.Artifacts, result.EndpointChangeFile, res); err != nil {
		t.Fatal(err)
	}
}

// measureChanges makes podX ready and takes it away again n times, both
// paths dialling all along, and records each change on each path. services
// is how many scale Services the cluster holds, for the record.
func measureChanges(ctx context.Context, w *latencyWorkload, n, services int) (*result.EndpointChange, error) {
	res := &result.EndpointChange{Header: header(), Services: services, Interval: cfg.interval}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends both clients' execs
	// Long enough for every change at the slowest seen; cancel ends it sooner.
	within := time.Duration(n) * 2 * (eventWithin + movedWithin)
	paths := []*path{
		{name: "agent", client: w.meshed, svc: w.agentSvc, to: w.agentTo()},
		{name: "kube-proxy", client: w.plain, svc: w.kubeProxySvc, to: w.kubeProxyTo()},
	}
	for _, p := range paths {
		var err error
		if p.s, err = dial(ctx, p.client, p.to, within, false); err != nil {
			return nil, err
		}
	}
	// Start with podX out and both paths sending to podA only.
	if err := setGate(ctx, suite.cluster, podX, false); err != nil {
		return nil, err
	}
	settled := time.Now()
	for _, p := range paths {
		if err := waitStream(ctx, p, "replies from "+podA+" only", func(rs []echoTimed) bool {
			return traffic.Only(rs, podA, settled, movedReplies)
		}); err != nil {
			return nil, err
		}
	}
	progress("endpoint change (%d Services): both paths reach %s only; %d changes each way", services, podA, n)
	prevDone := time.Now()
	var ready, gone, readyFlip, goneFlip [2][]float64
	var readyFailed, goneFailed []bool
	var afterFlip []float64
	for i := range n {
		for _, up := range []bool{true, false} {
			ch, err := change(ctx, w, paths, up, prevDone)
			if err != nil {
				return nil, fmt.Errorf("change %d (%s): %w", i+1, ch.Kind, err)
			}
			res.Changes = append(res.Changes, ch)
			afterFlip = append(afterFlip, traffic.Ms(ch.EventAgent.Sub(ch.Flipped)))
			if up {
				ready[0], ready[1] = append(ready[0], ch.Agent), append(ready[1], ch.KubeProxy)
				readyFlip[0], readyFlip[1] = append(readyFlip[0], ch.AgentFromFlip), append(readyFlip[1], ch.KubeProxyFromFlip)
				readyFailed = append(readyFailed, ch.KubeProxySyncFailed)
			} else {
				gone[0], gone[1] = append(gone[0], ch.Agent), append(gone[1], ch.KubeProxy)
				goneFlip[0], goneFlip[1] = append(goneFlip[0], ch.AgentFromFlip), append(goneFlip[1], ch.KubeProxyFromFlip)
				goneFailed = append(goneFailed, ch.KubeProxySyncFailed)
			}
			prevDone = time.Now()
			for _, p := range paths {
				p.s.Trim(prevDone.Add(-time.Second))
			}
		}
		if (i+1)%10 == 0 || i == 0 {
			last := res.Changes[len(res.Changes)-2:]
			progress("endpoint change (%d Services): %d/%d; last ready agent %.0f ms kube-proxy %.0f ms, gone agent %.0f ms kube-proxy %.0f ms",
				services, i+1, n, last[0].Agent, last[0].KubeProxy, last[1].Agent, last[1].KubeProxy)
		}
	}
	res.Ready = result.NewPair(ready[0], ready[1], readyFailed)
	res.Gone = result.NewPair(gone[0], gone[1], goneFailed)
	res.ReadyFromFlip = result.NewPair(readyFlip[0], readyFlip[1], readyFailed)
	res.GoneFromFlip = result.NewPair(goneFlip[0], goneFlip[1], goneFailed)
	res.EventAfterFlip = result.NewDist(afterFlip)
	finish(&res.Header)
	rr, gr := res.Ready.Ratios(res.Interval), res.Gone.Ratios(res.Interval)
	fr, fg := res.ReadyFromFlip.Ratios(res.Interval), res.GoneFromFlip.Ratios(res.Interval)
	stalled := 0
	for _, c := range res.Changes {
		if c.KubeProxySyncFailed {
			stalled++
		}
	}
	progress("endpoint change (%d Services): kube-proxy's sync failed on %s during %d of %d changes (left out of its distribution)",
		services, w.plain.Spec.NodeName, stalled, len(res.Changes))
	progress("endpoint change (%d Services), from the slice event: ready p50 %.0f/%.0f ms (%s) p99 %.0f/%.0f ms (%s); gone p50 %.0f/%.0f ms (%s) p99 %.0f/%.0f ms (%s); %s",
		services, res.Ready.Agent.P50, res.Ready.KubeProxy.P50, rr[0], res.Ready.Agent.P99, res.Ready.KubeProxy.P99, rr[2],
		res.Gone.Agent.P50, res.Gone.KubeProxy.P50, gr[0], res.Gone.Agent.P99, res.Gone.KubeProxy.P99, gr[2], res.LoadAfter)
	progress("endpoint change (%d Services), from the gate flip: ready p50 %.0f/%.0f ms (%s) p99 (%s); gone p50 %.0f/%.0f ms (%s) p99 (%s); slice event %.0f ms after the flip at p50",
		services, res.ReadyFromFlip.Agent.P50, res.ReadyFromFlip.KubeProxy.P50, fr[0], fr[2],
		res.GoneFromFlip.Agent.P50, res.GoneFromFlip.KubeProxy.P50, fg[0], fg[2], res.EventAfterFlip.P50)
	return res, nil
}

// change flips podX's gate and measures, on each path, from its Service's
// EndpointSlice event, and from just before the gate's API write, to the
// first reply from podX (up) or its last (down). prevDone is when the
// previous change had moved both paths.
func change(ctx context.Context, w *latencyWorkload, paths []*path, up bool, prevDone time.Time) (result.Change, error) {
	ch := result.Change{Kind: "gone"}
	want := slicewatch.Lacks(w.xIP)
	if up {
		ch.Kind, want = "ready", slicewatch.Has(w.xIP)
	}
	kpNode := w.plain.Spec.NodeName
	failures, err := kubeProxySyncFailures(ctx, kpNode)
	if err != nil {
		return ch, err
	}
	flipped := time.Now()
	ch.Flipped = flipped
	if err := setGate(ctx, suite.cluster, podX, up); err != nil {
		return ch, err
	}
	for _, p := range paths {
		var ev slicewatch.Observation
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, eventWithin, true, func(context.Context) (bool, error) {
			var ok bool
			ev, ok = w.slices.First(p.svc.Name, flipped, want)
			return ok, w.slices.Err()
		})
		if err != nil {
			return ch, fmt.Errorf("EndpointSlice of %s: %w", p.svc.Name, err)
		}
		var moved time.Time
		what := "the first reply from " + podX
		if !up {
			what = "no reply from " + podX
		}
		err = waitStream(ctx, p, what, func(rs []echoTimed) bool {
			var ok bool
			if up {
				moved, ok = traffic.FirstReply(rs, podX, prevDone)
			} else {
				moved, ok = traffic.Gone(rs, podX, ev.At, movedReplies)
			}
			return ok
		})
		if err != nil {
			return ch, err
		}
		if !up && moved.IsZero() {
			// No reply from podX since the stream was trimmed: it left before
			// the previous second of traffic, long before the event.
			return ch, fmt.Errorf("%s: no reply from %s to take the last of", p.name, podX)
		}
		ms, fromFlip := traffic.Ms(moved.Sub(ev.At)), traffic.Ms(moved.Sub(flipped))
		if p.name == "agent" {
			ch.EventAgent, ch.Agent, ch.AgentFromFlip = ev.At, ms, fromFlip
		} else {
			ch.EventKubeProxy, ch.KubeProxy, ch.KubeProxyFromFlip = ev.At, ms, fromFlip
		}
	}
	after, err := kubeProxySyncFailures(ctx, kpNode)
	if err != nil {
		return ch, err
	}
	ch.KubeProxySyncFailed = after > failures
	return ch, nil
}

// waitStream waits until ok holds for a path's attempts so far, or the
// client fails.
func waitStream(ctx context.Context, p *path, what string, ok func([]echoTimed) bool) error {
	err := wait.PollUntilContextTimeout(ctx, 25*time.Millisecond, movedWithin, true, func(context.Context) (bool, error) {
		rs, done, err := p.s.Attempts()
		if ok(rs) {
			return true, nil
		}
		if done {
			return false, fmt.Errorf("the client ended: %v", err)
		}
		return false, nil
	})
	if err != nil {
		rs, _, _ := p.s.Attempts()
		return fmt.Errorf("%s path (%s → %s): waiting for %s: %w (%s)", p.name, p.client.Name, p.to, what, err, summarize(rs))
	}
	return nil
}
