package connload

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// ClosedOptions is a closed loop: Concurrency workers, each opening one
// connection after another, for Duration or until N connections are done.
type ClosedOptions struct {
	Options
	Concurrency int
	Duration    time.Duration
	// N bounds the connections (0: none), so a fast path does not run the
	// client out of ephemeral ports (each closed connection waits in
	// TIME_WAIT for a minute).
	N int
}

// ClosedResult is a closed loop's outcome.
type ClosedResult struct {
	Concurrency int `json:"concurrency"`
	// For and Max are the loop's bounds: seconds and connections (0: none).
	For   float64 `json:"for"`
	Max   int     `json:"max,omitempty"`
	Conns int     `json:"conns"` // completed: hello read
	// PerSecond is Conns over Seconds, the loop's wall time.
	PerSecond float64        `json:"perSecond"`
	Seconds   float64        `json:"seconds"`
	Latency   Latency        `json:"latency"` // dial to the hello's first byte
	Errors    map[string]int `json:"errors,omitempty"`
}

// Closed runs a closed loop.
func Closed(ctx context.Context, o ClosedOptions) (ClosedResult, error) {
	if err := o.check(); err != nil {
		return ClosedResult{}, err
	}
	if o.Concurrency <= 0 || o.Duration <= 0 || o.N < 0 {
		return ClosedResult{}, fmt.Errorf("connload: closed loop of %d workers for %s (at most %d): want workers and duration > 0", o.Concurrency, o.Duration, o.N)
	}
	start := time.Now()
	end := start.Add(o.Duration)
	var mu sync.Mutex
	var lat []time.Duration
	errs := map[string]int{}
	taken := 0
	// next reserves a connection, false when the loop is over.
	next := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil || time.Now().After(end) || (o.N > 0 && taken >= o.N) {
			return false
		}
		taken++
		return true
	}
	var wg sync.WaitGroup
	for range o.Concurrency {
		wg.Go(func() {
			for next() {
				t0 := time.Now()
				first, err := hello(ctx, o.Options)
				mu.Lock()
				if err != nil {
					errs[echo.Classify(err)]++
				} else {
					lat = append(lat, first.Sub(t0))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return ClosedResult{}, fmt.Errorf("connload: closed loop: %w", err)
	}
	secs := time.Since(start).Seconds()
	r := ClosedResult{Concurrency: o.Concurrency, For: o.Duration.Seconds(), Max: o.N, Conns: len(lat), Seconds: secs, PerSecond: float64(len(lat)) / secs, Latency: NewLatency(lat)}
	if len(errs) > 0 {
		r.Errors = errs
		r.Latency.Failed = taken - len(lat)
	}
	return r, nil
}
