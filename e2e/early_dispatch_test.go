package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is a set of functions for dispatch that record the order they
// start in and the most that ran at once.
type recorder struct {
	mu      sync.Mutex
	started []int
	running int
	most    int
	wg      sync.WaitGroup
}

func (r *recorder) funcs(n int, body func(i int)) []func() {
	run := make([]func(), n)
	for i := range run {
		r.wg.Add(1)
		run[i] = func() {
			defer r.wg.Done()
			r.mu.Lock()
			r.started = append(r.started, i)
			r.running++
			r.most = max(r.most, r.running)
			r.mu.Unlock()
			body(i)
			r.mu.Lock()
			r.running--
			r.mu.Unlock()
		}
	}
	return run
}

// TestDispatchBound: every function runs, never more than the bound at
// once.
func TestDispatchBound(t *testing.T) {
	const n, parallel = 12, 3
	var r recorder
	dispatch(context.Background(), r.funcs(n, func(i int) { time.Sleep(time.Duration(n-i) * time.Millisecond) }), parallel)
	r.wg.Wait()
	if len(r.started) != n {
		t.Fatalf("%d of %d ran", len(r.started), n)
	}
	if r.most > parallel {
		t.Errorf("%d ran at once, bound %d", r.most, parallel)
	}
}

// TestDispatchOrder: with one slot, the next starts only once the one
// before has ended, so the start order is the given order (the legs').
func TestDispatchOrder(t *testing.T) {
	const n = 8
	var r recorder
	dispatch(context.Background(), r.funcs(n, func(i int) { time.Sleep(time.Duration(n-i) * time.Millisecond) }), 1)
	r.wg.Wait()
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(r.started, want) {
		t.Errorf("started in order %v, want %v", r.started, want)
	}
}

// TestDispatchCancelled: once the context ends, the rest are still called
// (in the suite each ends at once with the context's error), so nothing
// waits forever for them, even while every slot is held.
func TestDispatchCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	holding, release := make(chan struct{}), make(chan struct{})
	var r recorder
	run := r.funcs(5, func(i int) {
		if i == 0 {
			close(holding)
			<-release // holds the only slot
		}
	})
	done := make(chan struct{})
	go func() { dispatch(ctx, run, 1); close(done) }()
	<-holding
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("dispatch did not return after the context ended")
	}
	close(release)
	r.wg.Wait()
	slices.Sort(r.started)
	if !slices.Equal(r.started, []int{0, 1, 2, 3, 4}) {
		t.Errorf("called %v, want all 5", r.started)
	}
}
