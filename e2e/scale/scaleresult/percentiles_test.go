package scaleresult

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	if p := Summarize(nil); p != (Percentiles{}) {
		t.Errorf("Summarize(nil) = %+v", p)
	}
	// 1…2000 ms, shuffled: nearest rank gives sample ⌈q·n⌉.
	var d []time.Duration
	for i := range 2000 {
		d = append(d, time.Duration((i*7919)%2000+1)*time.Millisecond)
	}
	first := d[0]
	want := Percentiles{N: 2000, P50: 1000 * time.Millisecond, P99: 1980 * time.Millisecond, P999: 1998 * time.Millisecond, Max: 2000 * time.Millisecond}
	if p := Summarize(d); p != want {
		t.Errorf("Summarize(1…2000 ms) = %+v, want %+v", p, want)
	}
	if d[0] != first {
		t.Error("Summarize sorted its argument")
	}
	// 100 samples: p99 is the 99th (not the 100th through rounding), p99.9 the largest.
	var h []time.Duration
	for i := range 100 {
		h = append(h, time.Duration(i+1))
	}
	if p := Summarize(h); p.P50 != 50 || p.P99 != 99 || p.P999 != 100 || p.Max != 100 {
		t.Errorf("Summarize(1…100) = %+v", p)
	}
	if p := Summarize([]time.Duration{7}); p != (Percentiles{N: 1, P50: 7, P99: 7, P999: 7, Max: 7}) {
		t.Errorf("Summarize(one) = %+v", p)
	}
}
