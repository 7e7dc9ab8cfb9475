package soak

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// KindFirstConn is the first connections timed in on-demand mode.
const KindFirstConn = "first-conn"

// firstConnections dials each first-connection Service of cycle twice from
// every load client: the first connection is held while the proxy asks for
// the cluster, the second finds it.
type firstConnections struct{}

func (firstConnections) Name() string { return KindFirstConn }

func (firstConnections) Describe() string { return "first connections to new Services are measured" }

func (firstConnections) Windows(Layout) []Window { return one("first connections in on-demand mode") }

func (f firstConnections) Fails(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingFails(f)
}

func (f firstConnections) Cuts(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingCut(f)
}

// Prepare creates the first cycle's Services, so every agent knows them by
// the first window.
func (firstConnections) Prepare(ctx context.Context, r *runner) error {
	fc, err := createFirstConn(ctx, r.c, r.wl.services[TargetSteady], 0, r.cfg.FirstConnCount)
	if err != nil {
		return err
	}
	r.wl.firstConn = append(r.wl.firstConn, fc)
	return nil
}

func (firstConnections) Run(ctx context.Context, r *runner, w *Window, cycle int) error {
	if cycle >= len(r.wl.firstConn) {
		return fmt.Errorf("no first-connection Services for cycle %d", cycle+1)
	}
	var to []string
	for _, s := range r.wl.firstConn[cycle] {
		to = append(to, workload.Addr(s, 80))
	}
	w.Start = time.Now()
	results := make([][]echo.Result, len(r.wl.clients))
	errs := make([]error, len(r.wl.clients))
	var wg sync.WaitGroup
	for i := range r.wl.clients {
		p := &r.wl.clients[i]
		wg.Go(func() {
			out, _, err := r.c.Exec(ctx, p.Namespace, p.Name, workload.ClientContainer, "/svclb-echo", "sweep",
				"-to="+strings.Join(to, ","), "-count=2", "-parallel=1", "-timeout="+r.cfg.Timeout.String())
			if err == nil {
				results[i], err = workload.ParseDial(out)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	w.End = time.Now()
	var all []echo.Result
	r.mu.Lock()
	for i, rs := range results {
		if r.rec.Sweeps == nil {
			r.rec.Sweeps = map[string]Scan{}
		}
		p := r.wl.clients[i]
		r.rec.Sweeps[w.Name+" from "+p.Spec.NodeName] = Scan{Node: p.Spec.NodeName, Pod: p.Name, Results: rs}
		all = append(all, rs...)
	}
	r.rec.Figures.FirstConn = FirstConnLatency(r.allFirstConn())
	l := FirstConnLatency(all)
	r.rec.Figures.Bounds = append(r.rec.Figures.Bounds, Bound{What: "first connections (" + w.Name + ")", OK: l.Failed == 0 && l.N == len(to)*len(results),
		Detail: fmt.Sprintf("%d of %d first connections and their second ones answered; %d failed", l.N, len(to)*len(results), l.Failed)})
	r.mu.Unlock()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	w.notef("first connection p50 %.1f ms, p99 %.1f ms; warm p50 %.1f ms, p99 %.1f ms (%d Services × %d clients)",
		l.FirstP50, l.FirstP99, l.WarmP50, l.WarmP99, len(to), len(results))
	// The next cycle's Services, created now so every agent knows them by
	// then.
	next, err := createFirstConn(ctx, r.c, r.wl.services[TargetSteady], cycle+1, r.cfg.FirstConnCount)
	if err != nil {
		return err
	}
	r.wl.firstConn = append(r.wl.firstConn, next)
	return nil
}

// allFirstConn are the results of every first-connection probe so far.
func (r *runner) allFirstConn() []echo.Result {
	var out []echo.Result
	for name, sc := range r.rec.Sweeps {
		if strings.HasPrefix(name, "first connections") {
			out = append(out, sc.Results...)
		}
	}
	return out
}
