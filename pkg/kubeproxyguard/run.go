package kubeproxyguard

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Run guards until ctx ends: an nft monitor triggers a pass on every
// write, and a pass also runs every Options.Resync, and soon after a
// failed one.
func (g *Guard) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() { defer close(done); g.monitorLoop(ctx) }()
	defer func() { <-done }()

	resync := time.NewTicker(g.o.Resync)
	defer resync.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := 50 * time.Millisecond
	g.trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.kick:
		case <-resync.C:
		case <-retry.C:
		}
		if err := g.Reconcile(); err != nil {
			// Most failures are races with kube-proxy's own transactions
			// (an element it removed meanwhile): read again soon.
			retry.Reset(backoff)
			backoff = min(2*backoff, 2*time.Second)
		} else {
			backoff = 50 * time.Millisecond
		}
	}
}

// deleteNowPoll is how often DeleteNow runs a pass: it bounds the retry
// after a failed pass.
const deleteNowPoll = 100 * time.Millisecond

// DeleteNow cuts the chosen Services and returns when a pass finds none of
// them on kube-proxy's ClusterIP path (or ctx ends). It is the one-shot
// form of Run.
func (g *Guard) DeleteNow(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, deleteNowPoll, true, func(context.Context) (bool, error) {
		last = g.Reconcile()
		return last == nil, nil
	})
	if err != nil {
		return errors.Join(err, last)
	}
	return nil
}
