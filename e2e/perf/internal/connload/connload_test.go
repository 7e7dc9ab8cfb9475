package connload

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

func TestQuantile(t *testing.T) {
	// 1..10000 µs: nearest rank, p99.9 is the 9990th sample, not the 9991st.
	s := make([]time.Duration, 10000)
	for i := range s {
		s[i] = time.Duration(i+1) * time.Microsecond
	}
	for q, want := range map[float64]float64{0: 0.001, 0.5: 5, 0.99: 9.9, 0.999: 9.99, 1: 10} {
		if got := Quantile(s, q); got != want {
			t.Errorf("Quantile(1..10000 µs, %g) = %g ms, want %g", q, got, want)
		}
	}
	if got := Quantile(s[:3], 0.5); got != 0.002 {
		t.Errorf("Quantile of 3 at p50 = %g, want the 2nd sample", got)
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing is not 0")
	}
}

func TestNewLatency(t *testing.T) {
	l := NewLatency([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 100 * time.Millisecond})
	if l.N != 4 || l.P50 != 2 || l.P99 != 100 || l.P999 != 100 || l.Max != 100 {
		t.Fatalf("NewLatency = %+v", l)
	}
	// With 4 samples the curve stops where a quantile would need more than 4.
	last := l.Curve[len(l.Curve)-1]
	if last.Q != 1 || last.Ms != 100 {
		t.Errorf("curve ends at %+v, want the maximum at q=1", last)
	}
	for _, p := range l.Curve {
		if p.Q < 1 && 1-p.Q < 0.25 {
			t.Errorf("curve has %+v, finer than 1/4", p)
		}
	}
	if len(NewLatency(nil).Curve) != 0 {
		t.Error("a curve of nothing")
	}
}

func TestScheduled(t *testing.T) {
	start := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	iv := Interval(500)
	if iv != 2*time.Millisecond {
		t.Fatalf("Interval(500) = %s", iv)
	}
	if got := Scheduled(start, iv, 9999); !got.Equal(start.Add(19998 * time.Millisecond)) {
		t.Errorf("connection 9999 at 500/s due at %s, want start + 19.998 s", got)
	}
	// From the start, not accumulated: a third of a millisecond does not drift.
	iv = Interval(3000)
	if got := Scheduled(start, iv, 3000).Sub(start); got < 999*time.Millisecond || got > time.Second {
		t.Errorf("connection 3000 at 3000/s due after %s, want 1 s", got)
	}
}

// serve starts the suite's echo server on loopback.
func serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&echo.Server{Identity: echo.Identity{Pod: "p"}}).Serve(ctx, ln, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("echo server: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestOpenFromSchedule: a loop whose start is already 200 ms past makes its
// first connections late; their latency counts from when they were due.
func TestOpenFromSchedule(t *testing.T) {
	to := serve(t)
	r, err := Open(context.Background(), OpenOptions{Options: Options{To: to, Timeout: 2 * time.Second}, Rate: 1000, N: 50,
		Start: time.Now().Add(-200 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Latency.N != 50 || r.Latency.Failed != 0 || len(r.Errors) != 0 {
		t.Fatalf("Open = %+v", r)
	}
	// Connection 0 was due 200 ms before the loop began; 49 was due 151 ms before.
	if r.Latency.Max < 200 || r.Latency.P50 < 150 || r.MaxLag < 200 {
		t.Errorf("latency %+v, lag %g ms: the lateness is not counted", r.Latency, r.MaxLag)
	}
}

func TestOpenClosedBulk(t *testing.T) {
	to := serve(t)
	o := Options{To: to, Timeout: 2 * time.Second}
	ctx := context.Background()
	or, err := Open(ctx, OpenOptions{Options: o, Rate: 500, N: 100})
	if err != nil {
		t.Fatal(err)
	}
	if or.Latency.N != 100 || or.Seconds < 0.19 {
		t.Errorf("Open = %+v: want 100 connections over ≥ 0.2 s", or)
	}
	cr, err := Closed(ctx, ClosedOptions{Options: o, Concurrency: 4, Duration: 5 * time.Second, N: 200})
	if err != nil {
		t.Fatal(err)
	}
	if cr.Conns != 200 || cr.PerSecond <= 0 || len(cr.Errors) != 0 {
		t.Errorf("Closed = %+v: want 200 connections", cr)
	}
	br, err := Bulk(ctx, BulkOptions{Options: o, Streams: 2, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if br.Bytes < 2*chunk || br.MiBps <= 0 {
		t.Errorf("Bulk = %+v", br)
	}
	// Nothing listening: every connection fails, and is counted.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := ln.Addr().String()
	ln.Close()
	fr, err := Open(ctx, OpenOptions{Options: Options{To: gone, Timeout: time.Second}, Rate: 1000, N: 10})
	if err != nil {
		t.Fatal(err)
	}
	if fr.Latency.Failed != 10 || fr.Errors[echo.ErrRefused] != 10 {
		t.Errorf("Open to nothing = %+v", fr)
	}
}

func TestBadOptions(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, OpenOptions{Options: Options{To: "nowhere", Timeout: time.Second}, Rate: 1, N: 1}); err == nil {
		t.Error("Open to an address without a port")
	}
	if _, err := Open(ctx, OpenOptions{Options: Options{To: "127.0.0.1:1", Timeout: time.Second}}); err == nil {
		t.Error("Open at rate 0")
	}
	if _, err := Closed(ctx, ClosedOptions{Options: Options{To: "127.0.0.1:1"}, Concurrency: 1, Duration: time.Second}); err == nil {
		t.Error("Closed without a timeout")
	}
}
