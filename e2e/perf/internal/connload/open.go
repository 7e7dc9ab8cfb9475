package connload

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// OpenOptions is an open loop: N connections at Rate per second.
type OpenOptions struct {
	Options
	Rate float64
	N    int
	// Start is when connection 0 is due (zero: now). One in the past makes
	// the first connections late, which their latencies must show.
	Start time.Time
}

// OpenResult is an open loop's outcome.
type OpenResult struct {
	Rate float64 `json:"rate"`
	// Latency is from each connection's scheduled start to the first byte
	// of the hello; Failed in it counts the connections that got none.
	Latency Latency        `json:"latency"`
	Errors  map[string]int `json:"errors,omitempty"`
	// MaxLag is the latest any dial began after its scheduled start, in
	// milliseconds: how far the client itself fell behind.
	MaxLag float64 `json:"maxLagMs"`
	// Seconds is from the first scheduled start to the last connection's end.
	Seconds float64 `json:"seconds"`
}

// Open runs an open loop.
func Open(ctx context.Context, o OpenOptions) (OpenResult, error) {
	if err := o.check(); err != nil {
		return OpenResult{}, err
	}
	if o.Rate <= 0 || o.N <= 0 {
		return OpenResult{}, fmt.Errorf("connload: open loop of %d at %g/s: want both > 0", o.N, o.Rate)
	}
	start := o.Start
	if start.IsZero() {
		start = time.Now()
	}
	interval := Interval(o.Rate)
	lat := make([]time.Duration, o.N)
	errs := make([]error, o.N)
	var lag time.Duration
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	defer timer.Stop()
	launched := 0
	for i := range o.N {
		at := Scheduled(start, interval, i)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		lag = max(lag, time.Since(at))
		launched++
		wg.Go(func() {
			first, err := hello(ctx, o.Options)
			lat[i], errs[i] = first.Sub(at), err
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return OpenResult{}, fmt.Errorf("connload: open loop stopped after %d of %d: %w", launched, o.N, err)
	}
	r := OpenResult{Rate: o.Rate, MaxLag: ms(lag), Seconds: time.Since(start).Seconds()}
	var ok []time.Duration
	for i, err := range errs {
		if err != nil {
			if r.Errors == nil {
				r.Errors = map[string]int{}
			}
			r.Errors[echo.Classify(err)]++
			continue
		}
		ok = append(ok, lat[i])
	}
	r.Latency = NewLatency(ok)
	r.Latency.Failed = o.N - len(ok)
	return r, nil
}
