package connload

import (
	"math"
	"slices"
	"time"
)

// Latency is a distribution of latencies, in milliseconds.
type Latency struct {
	N      int     `json:"n"`
	P50    float64 `json:"p50"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p999"`
	Max    float64 `json:"max"`
	Curve  []Point `json:"curve,omitempty"`
	Failed int     `json:"failed,omitempty"`
}

// Point is the latency at quantile Q.
type Point struct {
	Q  float64 `json:"q"`
	Ms float64 `json:"ms"`
}

// curveQuantiles is the ladder Curve samples: dense in the tail, where a
// percentile chart on a "nines" axis spends its width.
var curveQuantiles = func() []float64 {
	var qs []float64
	for _, base := range []float64{0, 0.9, 0.99, 0.999} {
		step := (1 - base) / 10
		for i := range 9 {
			// Rounded: 0.3, not 0.30000000000000004, in the JSON.
			qs = append(qs, math.Round((base+float64(i)*step)*1e6)/1e6)
		}
	}
	return append(qs, 0.9999, 1)
}()

// NewLatency sorts samples and takes their quantiles.
func NewLatency(samples []time.Duration) Latency {
	s := slices.Clone(samples)
	slices.Sort(s)
	l := Latency{N: len(s)}
	if len(s) == 0 {
		return l
	}
	l.P50, l.P99, l.P999, l.Max = Quantile(s, 0.5), Quantile(s, 0.99), Quantile(s, 0.999), ms(s[len(s)-1])
	for _, q := range curveQuantiles {
		// A quantile finer than 1/N says nothing more than the maximum.
		if q < 1 && 1-q < 1/float64(len(s)) {
			continue
		}
		l.Curve = append(l.Curve, Point{Q: q, Ms: Quantile(s, q)})
	}
	return l
}

// Quantile is the nearest-rank q-quantile of sorted, in milliseconds: the
// smallest sample with at least q of them at or below it (0 when empty).
func Quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps q*n that is an integer in exact arithmetic (0.999 * 10000)
	// from rounding up past it in floating point.
	i := int(math.Ceil(q*float64(len(sorted))-1e-9)) - 1
	return ms(sorted[min(max(i, 0), len(sorted)-1)])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
