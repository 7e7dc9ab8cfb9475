package agent

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// runLoop runs f's loop until the test ends and returns a function that stops it and waits.
func runLoop(t *testing.T, f *fixture, debounce time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	never := make(chan struct{})
	go func() {
		defer close(done)
		f.s.loop(ctx, func() <-chan struct{} { return never }, debounce)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// waitClusters waits until the published status counts n clusters and returns when it saw it.
func waitClusters(t *testing.T, f *fixture, n int, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if f.s.status.Load().Clusters >= n {
			return time.Now()
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d clusters not published within %s (have %d)", n, within, f.s.status.Load().Clusters)
	return time.Time{}
}

// TestLoopWidensUnderSustainedChurn: Services created one every 2 ms for a second and a half
// (a sustained burst) cost a push per widening window, not one per debounce: about a dozen
// with windows doubling from 10 ms to 400 ms, where a fixed 10 ms window makes a hundred. Then,
// after a quiet window, the window is back at the debounce: of two changes 30 ms apart, the
// second is pushed at once, not a widened window after the first.
func TestLoopWidensUnderSustainedChurn(t *testing.T) {
	f := newFixture(t)
	f.s.maxCoalesce = 400 * time.Millisecond
	f.sync(t)
	before := len(f.pub.updates)
	add := func(i int) {
		svc := svcObj(fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", 1+i/250, 1+i%250))
		_ = f.services.Add(svc)
		f.s.serviceChanged(svc)
	}
	stop := runLoop(t, f, 10*time.Millisecond)
	n := 0
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); n++ {
		add(n)
		time.Sleep(2 * time.Millisecond)
	}
	waitClusters(t, f, n+1, 5*time.Second) // + passthrough_original_dst
	time.Sleep(600 * time.Millisecond)     // a quiet window: longer than the widest
	add(n)
	waitClusters(t, f, n+2, 5*time.Second)
	time.Sleep(30 * time.Millisecond) // inside the debounce no more: the first push's window closed
	changed := time.Now()
	add(n + 1)
	published := waitClusters(t, f, n+3, 5*time.Second)
	stop()
	// Under load the burst's pushes can only be fewer (slower feeding, longer syncs); a fixed
	// 10 ms window makes about 1500/(10+2) ≈ 100-150.
	if pushes := len(f.pub.updates) - before; pushes > 30 {
		t.Errorf("%d changes over 1.5 s made %d pushes, want at most 30 (windows widening to 400 ms)", n, pushes)
	}
	// Without the reset the second change waits out a 400 ms window.
	if d := published.Sub(changed); d > 150*time.Millisecond {
		t.Errorf("after a quiet window, a change was published %s after it happened: the window did not reset", d)
	}
}
