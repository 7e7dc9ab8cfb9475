package scale

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// OpenLoop starts n probes at a fixed rate (per second), each on schedule whether or not the
// earlier ones have finished, and returns each successful probe's latency measured from the
// time it was due, not from when it actually started: a stall (of the proxy, or of this
// process) then shows as the latency of every connection it delayed, which a closed loop
// (one connection after another) would hide by sending fewer (coordinated omission). probe
// returns the time its connection saw its first byte. lag is the latest any probe started after
// it was due: how far the generator itself fell behind.
func OpenLoop(ctx context.Context, n int, rate float64, probe func(context.Context) (time.Time, error)) (lat []time.Duration, errs []error, lag time.Duration, err error) {
	if n <= 0 || rate <= 0 {
		return nil, nil, 0, fmt.Errorf("open loop: %d probes at %g/s: want both positive", n, rate)
	}
	interval := time.Duration(float64(time.Second) / rate)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				wg.Wait()
				return lat, errs, lag, ctx.Err()
			}
		}
		late := time.Since(due)
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, perr := probe(ctx)
			mu.Lock()
			defer mu.Unlock()
			lag = max(lag, late)
			if perr != nil {
				errs = append(errs, perr)
				return
			}
			lat = append(lat, first.Sub(due))
		}()
	}
	wg.Wait()
	return lat, errs, lag, nil
}
