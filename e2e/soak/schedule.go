package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/faults"
)

// schedule runs the selected faults that can run on the cluster (runnable)
// one after the other, a gap apart, in cycles until the load's duration is
// used up (at least one cycle).
func (r *runner) schedule(ctx context.Context) {
	r.logf("load running; quiet lead-in %s", leadIn)
	if !sleepCtx(ctx, leadIn) || len(r.cfg.Faults) == 0 {
		return
	}
	fs := r.runnable()
	if len(fs) == 0 {
		return
	}
	stop := r.rec.LoadStart.Add(r.cfg.Duration - tail)
	for cycle := 0; ctx.Err() == nil; cycle++ {
		for _, f := range fs {
			r.fault(ctx, f, cycle)
			if !sleepCtx(ctx, r.cfg.Gap) {
				return
			}
		}
		if time.Now().After(stop) {
			return
		}
	}
}

// runnable are the faults of SOAK_FAULTS that can run on the cluster, in
// order. Each other one is recorded once, where the first fault would
// start: its windows skipped, each with one note saying why (skipWhy), so
// that the report lists it as skipped, not passed.
func (r *runner) runnable() []Fault {
	var out []Fault
	for _, name := range r.cfg.Faults {
		f, ok := faultOf(name)
		if !ok {
			r.addError("SOAK_FAULTS: no fault %q", name)
			continue
		}
		why := skipWhy(f, r.c)
		if why == nil {
			out = append(out, f)
			continue
		}
		r.logf("fault: %s: skipped: %v", name, why)
		for _, w := range f.Windows(r.layout()) {
			w.Kind, w.Skipped = f.Name(), true
			w.Start = time.Now()
			w.End = w.Start
			w.notef("skipped: %v", why)
			r.mu.Lock()
			r.rec.Windows = append(r.rec.Windows, w)
			r.mu.Unlock()
		}
	}
	return out
}

// skipWhy is why f cannot run on c (needer); nil when it can.
func skipWhy(f Fault, c *cluster.Cluster) error {
	if n, ok := f.(needer); ok {
		return n.Needs(c)
	}
	return nil
}

// fault runs one run of f: each of its windows in turn, then what it
// settles before the next fault.
func (r *runner) fault(ctx context.Context, f Fault, cycle int) {
	suffix := ""
	if cycle > 0 {
		suffix = fmt.Sprintf(" #%d", cycle+1)
	}
	for _, w := range f.Windows(r.layout()) {
		w.Name += suffix
		w.Kind = f.Name()
		r.window(ctx, w, func(ctx context.Context, w *Window) error { return f.Run(ctx, r, w, cycle) })
	}
	if s, ok := f.(settler); ok {
		s.Settle(ctx, r)
	}
}

// layout is the cluster the faults plan their windows on.
func (r *runner) layout() Layout {
	l := Layout{Nodes: cluster.NodeNames(r.c.Nodes), Workers: cluster.NodeNames(r.c.Workers())}
	l.ControlPlane, _ = faults.ControlPlane(r.c)
	return l
}

// window runs f as the window plan: Start before it, End when it returns
// (unless f set it), its error recorded.
func (r *runner) window(ctx context.Context, plan Window, f func(context.Context, *Window) error) {
	w := &plan
	name := w.Name
	w.Start = time.Now()
	r.logf("fault: %s", name)
	err := f(ctx, w)
	if w.End.IsZero() {
		w.End = time.Now()
	}
	if err != nil {
		w.Error = err.Error()
		r.logf("fault: %s FAILED after %s: %v", name, w.End.Sub(w.Start).Round(100*time.Millisecond), err)
	} else {
		r.logf("fault: %s: %s; %s", name, w.End.Sub(w.Start).Round(100*time.Millisecond), strings.Join(w.Notes, "; "))
	}
	r.mu.Lock()
	r.rec.Windows = append(r.rec.Windows, *w)
	r.mu.Unlock()
}

func (w *Window) step(name string) { w.Steps = append(w.Steps, Step{Name: name, At: time.Now()}) }

func (w *Window) notef(format string, args ...any) {
	w.Notes = append(w.Notes, fmt.Sprintf(format, args...))
}

func (r *runner) addError(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Errors = append(r.rec.Errors, fmt.Sprintf(format, args...))
}

// refusalsWithin bounds readRefusals' wait for the agents' logs to catch
// up with the proxies: Envoy flushes its access log every second.
const refusalsWithin = 15 * time.Second

// readRefusals records the refusals the agents logged since the load
// started, once every node's agent has logged as many NC refusals as its
// proxy counted NC closes: the proxy sends its access log in batches, so a
// refusal reaches the agent's log a moment after the client saw it. If they
// do not catch up within refusalsWithin it reads what is there and logs the
// shortfall; the figures' unlogged column shows it at the end.
func (r *runner) readRefusals(ctx context.Context) {
	since := r.rec.LoadStart
	nodes := cluster.NodeNames(r.c.Nodes)
	t0 := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, refusalsWithin, true, func(ctx context.Context) (bool, error) {
		nc, err := r.stats.noRoutesNow(ctx, r.c, nodes)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if err := r.refusals(ctx, since); err != nil {
			last = err.Error()
			return false, nil
		}
		r.mu.Lock()
		logged := loggedNC(r.rec.Refusals, since)
		r.mu.Unlock()
		for _, n := range nodes {
			if logged[n] < nc[n] {
				last = fmt.Sprintf("%s: %d of %d NC closes logged", n, logged[n], nc[n])
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		r.logf("refusal logs not caught up after %s: %s", refusalsWithin, last)
		if rerr := r.refusals(ctx, since); rerr != nil {
			r.addError("reading the agents' refusal logs: %v", rerr)
		}
		return
	}
	r.logf("refusal logs caught up with the proxies' NC closes in %s", time.Since(t0).Round(100*time.Millisecond))
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
