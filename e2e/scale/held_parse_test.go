package scale

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

func TestOpenLoop(t *testing.T) {
	var calls atomic.Int64
	boom := errors.New("boom")
	lat, errs, _, err := OpenLoop(context.Background(), 30, 1000, func(context.Context) (time.Time, error) {
		if calls.Add(1)%10 == 0 {
			return time.Time{}, boom
		}
		return time.Now(), nil
	})
	if err != nil || calls.Load() != 30 || len(lat) != 27 || len(errs) != 3 || !errors.Is(errs[0], boom) {
		t.Fatalf("OpenLoop: %d calls, %d latencies, errors %v, %v", calls.Load(), len(lat), errs, err)
	}
	for _, l := range lat {
		if l < 0 {
			t.Errorf("latency %s before the connection was due", l)
		}
	}
	for _, bad := range [][2]float64{{0, 10}, {5, 0}, {5, -1}} {
		if _, _, _, err := OpenLoop(context.Background(), int(bad[0]), bad[1], nil); err == nil {
			t.Errorf("OpenLoop(%v): no error", bad)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := OpenLoop(ctx, 5, 0.001, func(context.Context) (time.Time, error) { return time.Now(), nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenLoop, cancelled: %v", err)
	}
}

func TestCountFDs(t *testing.T) {
	n, err := CountFDs(os.Getpid())
	if err != nil || n < 3 {
		t.Fatalf("CountFDs(self) = %d, %v", n, err)
	}
	if _, err := CountFDs(-1); err == nil {
		t.Error("CountFDs(-1): no error")
	}
}
