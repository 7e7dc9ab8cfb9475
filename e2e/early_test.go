package e2e

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
)

// earlyParallel bounds the legs prepared at once in the background: each
// starts pods, and the kubelets of a 2-core machine start them no faster
// for more.
const earlyParallel = 3

// Background prepares (leg.early): BeforeSuite starts the prepares of the
// selected legs marked early, in the legs' order, earlyParallel at a time,
// while the first legs run: most of a prepare is waiting for pods to start,
// which needs no leg's turn. Nothing waits here; each leg's BeforeAll waits
// for its own, and a prepare that is not early waits for all of them
// (waitEarlyDone).
var (
	earlyCtx    context.Context
	earlyCancel context.CancelFunc
	// earlyRunning counts the background prepares not done yet.
	earlyRunning sync.WaitGroup
)

var _ = BeforeSuite(func() {
	match, err := types.ParseLabelFilter(GinkgoLabelFilter())
	if err != nil {
		Fail(fmt.Sprintf("label filter %q: %v", GinkgoLabelFilter(), err))
	}
	earlyCtx, earlyCancel = context.WithCancel(context.Background())
	var names []string
	var run []func()
	for _, l := range legs {
		if l.early == nil || !match([]string{evidence.LegLabel, l.name}) {
			continue
		}
		names = append(names, l.name)
		run = append(run, l.early())
	}
	if len(run) == 0 {
		return
	}
	progress("preparing %d legs in the background, %d at a time, in order: %v", len(names), earlyParallel, names)
	go dispatch(earlyCtx, run, earlyParallel)
})

// dispatch starts the functions of run in their order, at most parallel
// at a time; once ctx ends it calls the rest at once (a scheduled prepare
// then ends with the context's error). It returns when the last one
// started.
func dispatch(ctx context.Context, run []func(), parallel int) {
	sem := make(chan struct{}, parallel)
	for _, f := range run {
		select {
		case sem <- struct{}{}:
			go func() {
				defer func() { <-sem }()
				f()
			}()
		case <-ctx.Done():
			f()
		}
	}
}

var _ = AfterSuite(func() {
	if earlyCancel != nil {
		earlyCancel()
	}
})

// prepared is the outcome of a leg's prepare started before its turn.
type prepared[W any] struct {
	done chan struct{}
	w    W
	err  error
}

// wait waits for the background prepare, or ctx.
func (p *prepared[W]) wait(ctx context.Context) (W, error) {
	select {
	case <-p.done:
		return p.w, p.err
	case <-ctx.Done():
		var zero W
		return zero, fmt.Errorf("waiting for the background prepare: %w", ctx.Err())
	}
}

// earlyStarter is what a leg marked early registers: its prepare, once
// scheduled, and where the outcome lands.
type earlyStarter[W any] struct {
	p *prepared[W]
}

// schedule makes the prepare's outcome waitable now and returns the
// function that runs it (a dispatcher slot's work).
func (e *earlyStarter[W]) schedule(name string, prepare func(context.Context) (W, error)) func() {
	p := &prepared[W]{done: make(chan struct{})}
	e.p = p
	earlyRunning.Add(1)
	return func() {
		defer earlyRunning.Done()
		defer close(p.done)
		if err := earlyCtx.Err(); err != nil {
			p.err = err
			return
		}
		t0 := time.Now()
		p.w, p.err = prepare(earlyCtx)
		if p.err != nil {
			progress("leg %s: background prepare failed after %s: %v", name, time.Since(t0).Round(100*time.Millisecond), p.err)
			return
		}
		progress("leg %s: prepared in the background in %s", name, time.Since(t0).Round(100*time.Millisecond))
	}
}

// waitEarlyDone waits until no background prepare runs: a prepare that is
// not early runs alone, since it may pick an unallocated Service address
// that a Service created meanwhile could take.
func waitEarlyDone(ctx context.Context) error {
	done := make(chan struct{})
	go func() { earlyRunning.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the background prepares: %w", ctx.Err())
	}
}
