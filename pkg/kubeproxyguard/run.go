package kubeproxyguard

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Run guards until ctx ends: an nft monitor triggers a pass on every
// write, and a pass also runs every Options.Resync, and when a Service's
// chains are due for deletion.
func (g *Guard) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); g.monitorLoop(ctx) }()
	defer wg.Wait()

	resync := time.NewTicker(g.o.Resync)
	defer resync.Stop()
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	backoff := 50 * time.Millisecond
	g.trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.kick:
		case <-resync.C:
		case <-due.C:
		}
		next, err := g.Reconcile()
		if err != nil {
			// Most failures are races with kube-proxy's own transactions
			// (an element it removed, a chain it re-referenced): read again.
			next = sooner(next, time.Now().Add(backoff))
			backoff = min(2*backoff, 2*time.Second)
		} else {
			backoff = 50 * time.Millisecond
		}
		if !next.IsZero() {
			due.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

// deleteNowPoll is how often DeleteNow runs a pass: it bounds both the
// retry after a failed pass and the wait past a Service's chain deletion
// deadline.
const deleteNowPoll = 100 * time.Millisecond

// DeleteNow cuts the chosen Services and deletes their chains, waiting
// ChainDeleteDelay in between, and returns when every one of them is gone
// from kube-proxy's table (or ctx ends). It is the one-shot form of Run.
func (g *Guard) DeleteNow(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, deleteNowPoll, true, func(context.Context) (bool, error) {
		next, err := g.Reconcile()
		last = err
		return err == nil && next.IsZero(), nil
	})
	if err != nil {
		return errors.Join(err, last)
	}
	return nil
}

// sooner returns the earlier of two deadlines, a zero one meaning none.
func sooner(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}
