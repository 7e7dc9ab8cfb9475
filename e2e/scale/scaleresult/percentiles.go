package scaleresult

import (
	"math"
	"slices"
	"time"
)

// Percentiles summarises latency samples by nearest rank (the smallest sample with at least q
// of them at or below it): no interpolation, so every figure is a latency one connection had.
type Percentiles struct {
	N    int           `json:"n"`
	P50  time.Duration `json:"p50"`
	P99  time.Duration `json:"p99"`
	P999 time.Duration `json:"p999"`
	Max  time.Duration `json:"max"`
}

// Summarize returns the percentiles of d (which it does not change); all zero when d is empty.
func Summarize(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return Percentiles{N: len(s), P50: nearestRank(s, 0.50), P99: nearestRank(s, 0.99), P999: nearestRank(s, 0.999), Max: s[len(s)-1]}
}

// nearestRank is the q quantile of sorted s: the sample of rank ⌈q·n⌉ (1-based).
func nearestRank(s []time.Duration, q float64) time.Duration {
	// Rounded first so that 0.99·100 is rank 99, not 100 through 99.00000000000001.
	r := int(math.Ceil(math.Round(q*float64(len(s))*1e6) / 1e6))
	return s[min(max(r, 1), len(s))-1]
}
