package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
)

// countingPub counts the pushes the loop makes while the test reads them.
type countingPub struct {
	mu    sync.Mutex
	inner publisher
	n     int
}

func (c *countingPub) Apply(u xdsserver.Update) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.inner.Apply(u)
}

func (c *countingPub) pushes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestCoalesceWindow drives the loop on a fake clock, one debounce slice at a time, so what it
// checks does not depend on the machine's load: a change to an idle loop is pushed without the
// clock moving; a sustained burst (a change in every slice) is pushed at the end of windows of
// 1, 2, 4, 8, 8, … slices; a burst that pauses for one slice is pushed at that slice, and the
// loop is idle again after one more quiet slice.
func TestCoalesceWindow(t *testing.T) {
	const debounce = 10 * time.Millisecond
	g := gomega.NewWithT(t)
	f := newFixture(t)
	f.sync(t)
	pub := &countingPub{inner: f.pub}
	f.s.pub = pub
	clk := testingclock.NewFakeClock(time.Now())
	f.s.clock = clk
	f.s.maxCoalesce = 8 * debounce

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	never := make(chan struct{})
	go func() {
		defer close(done)
		f.s.loop(ctx, func() <-chan struct{} { return never }, debounce)
	}()
	t.Cleanup(func() { cancel(); <-done })

	n := 0
	change := func() {
		svc := svcObj(fmt.Sprintf("svc-%d", n), fmt.Sprintf("10.96.%d.%d", 1+n/250, 1+n%250))
		n++
		_ = f.services.Add(svc)
		f.s.serviceChanged(svc)
	}
	// pushedAtOnce: the loop is idle, so a change goes out with the clock standing still.
	pushedAtOnce := func(why string) {
		t.Helper()
		before := pub.pushes()
		change()
		g.Eventually(pub.pushes).WithTimeout(5*time.Second).WithPolling(time.Millisecond).
			Should(gomega.Equal(before+1), "%s: a change to an idle loop is pushed without the clock moving", why)
	}
	// slice lets one debounce pass once the loop waits on the clock, and returns once the loop
	// waits again (or, if it went idle, once it had the time to): its pushes are then counted.
	slice := func() {
		t.Helper()
		g.Eventually(clk.HasWaiters).WithTimeout(5*time.Second).WithPolling(time.Millisecond).
			Should(gomega.BeTrue(), "the loop waits on a coalescing window")
		clk.Step(debounce)
	}
	waiting := func() {
		t.Helper()
		g.Eventually(clk.HasWaiters).WithTimeout(5 * time.Second).WithPolling(time.Millisecond).Should(gomega.BeTrue())
	}

	pushedAtOnce("first change")

	// A sustained burst: a change in each of 31 slices.
	var pushedAt []int
	for i := 1; i <= 31; i++ {
		before := pub.pushes()
		change()
		slice()
		waiting() // every slice brought a change: the loop keeps coalescing
		if pub.pushes() > before {
			pushedAt = append(pushedAt, i)
		}
	}
	if want := []int{1, 3, 7, 15, 23, 31}; !slices.Equal(pushedAt, want) {
		t.Errorf("a sustained burst was pushed after slices %v, want %v (windows of 1, 2, 4, 8, 8, 8 slices)", pushedAt, want)
	}

	// The window is now 8 slices wide. A change in the first slice, then a quiet slice: the
	// burst paused, so the change goes out at the quiet slice, not at the end of the window.
	before := pub.pushes()
	change()
	slice()
	waiting()
	if pub.pushes() != before {
		t.Fatalf("pushed after one busy slice of an 8-slice window")
	}
	slice()
	g.Eventually(pub.pushes).WithTimeout(5*time.Second).WithPolling(time.Millisecond).
		Should(gomega.Equal(before+1), "a burst that paused for a slice is pushed at that slice")
	// One more quiet slice (the window is back at the debounce): idle.
	slice()
	pushedAtOnce("after a quiet slice")
	if pushes := pub.pushes(); pushes != 1+len(pushedAt)+2 {
		t.Errorf("%d pushes, want %d", pushes, 1+len(pushedAt)+2)
	}
}
